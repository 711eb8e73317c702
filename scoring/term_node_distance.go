package scoring

func init() {
	RegisterTerm(SnapshotTerm{
		Name: "node_distance", Key: "distance", Default: 1,
		Doc:     "0 same zone, 0.5 same region but another zone, 1 another region; 0 when either side's locality is unset; always known",
		Reads:   "Worker.Distance (Distance of the worker's zone and region from the replica's locality.zone and locality.region)",
		Prepare: PerWorker(func(w *Worker) Signal { return Known(w.Distance) }),
	})
}

// Distance is the node_distance term: 0 same zone, 0.5 same region, 1
// elsewhere; 0 when either locality is unset.
func Distance(workerZone, workerRegion, zone, region string) float64 {
	switch {
	case zone != "" && workerZone == zone:
		return 0
	case region != "" && workerRegion == region:
		return 0.5
	case (zone == "" && region == "") || (workerZone == "" && workerRegion == ""):
		return 0
	default:
		return 1
	}
}
