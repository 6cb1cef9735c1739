package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runPerftest runs perftest's tools with the same sizes on the device and
// fills in the rows' reference figures.
func runPerftest(dev string, rows []row) error {
	secs := strconv.Itoa(max(int(duration.Seconds()), 1))
	results := map[string][]float64{}
	for _, r := range rows {
		if _, done := results[r.perftest]; done {
			continue
		}
		args := []string{"-s", strconv.Itoa(*bwSize), "-D", secs}
		if r.lat {
			args = []string{"-s", strconv.Itoa(*latSize), "-n", strconv.Itoa(*latIters)}
		}
		nums, err := perftestRun(r.perftest, dev, *addr, args...)
		if err != nil {
			return err
		}
		results[r.perftest] = nums
	}
	for i, r := range rows {
		// ib_send_lat: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
		// ib_*_bw: #bytes #iterations BW peak BW average MsgRate
		if nums := results[r.perftest]; r.col < len(nums) {
			rows[i].ref = nums[r.col]
		}
	}
	return nil
}

// perftestRun runs a perftest server and client and returns the numbers of
// the client's result line.
func perftestRun(tool, dev, host string, args ...string) ([]float64, error) {
	common := append([]string{"-d", dev, "-R", "-F"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var srvOut bytes.Buffer
	srv := exec.CommandContext(ctx, tool, common...)
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Wait() }()
	defer wg.Wait()
	var (
		out []byte
		err error
	)
	for try := 0; try < 10; try++ {
		time.Sleep(time.Second)
		out, err = exec.CommandContext(ctx, tool, append(common, host)...).CombinedOutput()
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s\nserver:\n%s", tool, err, out, srvOut.String())
	}
	size := args[1]
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != size {
			continue
		}
		var nums []float64
		for _, x := range f {
			v, err := strconv.ParseFloat(x, 64)
			if err != nil {
				break
			}
			nums = append(nums, v)
		}
		fmt.Printf("%s %s: %s\n", tool, strings.Join(args, " "), strings.TrimSpace(line))
		return nums, nil
	}
	return nil, errors.New(tool + ": no result line in its output:\n" + string(out))
}
