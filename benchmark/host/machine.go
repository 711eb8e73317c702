package host

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes the machine a run measured: CPU model, cores, memory.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					model = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %d GiB", kb>>20)
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s", model, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH)
}
