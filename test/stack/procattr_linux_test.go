package stack

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHelperParent is not a test: run as a child by
// TestChildDiesWithItsParent, it starts `sleep` through Start, prints the
// sleep's pid and waits to be killed.
func TestHelperParent(t *testing.T) {
	if os.Getenv("STACK_HELPER_PARENT") != "1" {
		t.Skip("helper process")
	}
	p, err := Start("sleep", "sleep", []string{"60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("pid " + strconv.Itoa(p.Pid()) + "\n")
	time.Sleep(time.Minute) // held until the test kills this process
}

// A process started through Start dies with the process that started it,
// even when that one is killed without stopping it.
func TestChildDiesWithItsParent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestHelperParent$", "-test.v")
	parent.Env = append(os.Environ(), "STACK_HELPER_PARENT=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()
	child := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if pid, ok := strings.CutPrefix(sc.Text(), "pid "); ok {
			child, _ = strconv.Atoi(pid)
			break
		}
	}
	if child == 0 {
		t.Fatal("the helper printed no child pid")
	}
	if !alive(child) {
		t.Fatalf("child %d not running", child)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("child %d outlived its killed parent", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs: it exists and is not a zombie waiting for
// a reaper.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
