package gpusim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// shutdownGrace bounds how long a stopping listener waits for streams in
// flight before closing them.
const shutdownGrace = 10 * time.Second

// Serve runs one HTTP listener per config until ctx ends (then it shuts all
// down gracefully) or every GPU has exited by --exit-after. ready, if not
// nil, is called with each GPU's id and bound address once it accepts
// connections (useful with port 0).
func Serve(ctx context.Context, cfgs []Config, log *zap.Logger, ready func(id, addr string)) error {
	type gpu struct {
		srv  *Server
		http *http.Server
		ln   net.Listener
	}
	gpus := make([]gpu, 0, len(cfgs))
	closeAll := func() {
		for _, g := range gpus {
			_ = g.ln.Close()
		}
	}
	for _, c := range cfgs {
		srv, err := NewServer(c, log)
		if err != nil {
			closeAll()
			return err
		}
		ln, err := net.Listen("tcp", c.Listen)
		if err != nil {
			closeAll()
			return fmt.Errorf("gpu %s: %w", c.ID, err)
		}
		hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		gpus = append(gpus, gpu{srv: srv, http: hs, ln: ln})
	}

	var wg sync.WaitGroup
	errs := make([]error, len(gpus))
	for i, g := range gpus {
		// The engine outlives ctx until the streams have drained.
		engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
		wg.Add(3)
		go func() {
			defer wg.Done()
			g.srv.Run(engCtx)
		}()
		go func() {
			defer wg.Done()
			if err := g.http.Serve(g.ln); !errors.Is(err, http.ErrServerClosed) {
				errs[i] = fmt.Errorf("gpu %s: %w", g.srv.cfg.ID, err)
			}
		}()
		go func() {
			defer wg.Done()
			defer stopEngine() // only after the streams have drained
			select {
			case <-ctx.Done():
			case <-g.srv.Exited():
				log.Info("exit-after reached, stopping", zap.String("gpu", g.srv.cfg.ID), zap.Int("exit_after", g.srv.cfg.ExitAfter))
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
			defer cancel()
			if err := g.http.Shutdown(sctx); err != nil {
				_ = g.http.Close()
			}
		}()
		addr := g.ln.Addr().String()
		log.Info("gpu listening", zap.String("gpu", g.srv.cfg.ID), zap.String("addr", addr),
			zap.Strings("models", g.srv.cfg.Models), zap.String("profile", g.srv.cfg.Profile),
			zap.String("metrics_format", g.srv.cfg.MetricsFormat))
		if ready != nil {
			ready(g.srv.cfg.ID, addr)
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
