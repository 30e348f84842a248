// Command loadgen drives an HTTP service open loop (at a fixed rate, latency counted from
// when each request was due, so a stall is not hidden) or closed loop, over keep-alive
// connections, and prints one JSON object: the latencies and what the answers said.
//
// It is the serving and collector benchmarks' load generator (bench/serving_latency.py,
// bench/collector_throughput.py): the service under test and the generator share the
// machine's two cores, and a request costs this program a small fraction of what it costs
// Python's asyncio.
//
//	loadgen -addr 127.0.0.1:18090 -token T -paths paths.txt -connections 32 \
//	    -rate 2000 -seconds 20 -warmup 3
//	loadgen -addr 127.0.0.1:18188 -header "Authorization: Basic ..." -paths path.txt \
//	    -bodies bodies.bin -header "Content-Type: application/json" -sum accepted -connections 8
//
// With -bodies (records of "<length>\n<bytes>"), each request is a POST of the next body to
// the first path; -sum adds up the integer field of that name in every answer. The output's
// "slow" lists every measured request slower than -slow-ms: when it was due (Unix seconds)
// and its latency, to line a tail up with what else ran on the machine at that moment.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type result struct {
	Requests  int          `json:"requests"`
	Errors    int          `json:"errors"`
	FirstErr  string       `json:"first_error,omitempty"`
	CacheHits int          `json:"cache_hits"`
	Summed    int64        `json:"summed"`
	Elapsed   float64      `json:"elapsed_s"`
	Latencies []float64    `json:"latencies_ms"`
	Slow      [][2]float64 `json:"slow"`
}

type sample struct {
	due     time.Time
	latency time.Duration
	hit     bool
	summed  int64
	err     string
}

var cacheHit = []byte(`"cache":{"hit":true`)

type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "host:port of the service")
	token := flag.String("token", "", "bearer token")
	pathsFile := flag.String("paths", "", "file of request paths, one per line, cycled through")
	connections := flag.Int("connections", 32, "keep-alive connections")
	rate := flag.Float64("rate", 0, "requests per second; 0: closed loop")
	seconds := flag.Float64("seconds", 20, "measured seconds")
	warmup := flag.Float64("warmup", 3, "seconds before measuring")
	bodiesFile := flag.String("bodies", "", "file of request bodies (\"<length>\\n<bytes>\" each): POST them")
	sum := flag.String("sum", "", "add up this integer field of every answer")
	slowMs := flag.Float64("slow-ms", 20, "list the requests slower than this (ms) with when they were due")
	var headers headerList
	flag.Var(&headers, "header", "a header of every request (\"Name: value\"), repeatable")
	flag.Parse()

	raw, err := os.ReadFile(*pathsFile)
	if err != nil {
		fail(err)
	}
	paths := strings.Split(strings.TrimSpace(string(raw)), "\n")
	head := ""
	if *token != "" {
		head += "Authorization: Bearer " + *token + "\r\n"
	}
	for _, h := range headers {
		head += h + "\r\n"
	}
	var requests [][]byte
	if *bodiesFile == "" {
		for _, path := range paths {
			requests = append(requests, []byte(fmt.Sprintf(
				"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path, *addr, head)))
		}
	} else {
		bodies, err := readBodies(*bodiesFile)
		if err != nil {
			fail(err)
		}
		for _, body := range bodies {
			requests = append(requests, append([]byte(fmt.Sprintf(
				"POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n",
				paths[0], *addr, head, len(body))), body...))
		}
	}
	var field []byte
	if *sum != "" {
		field = []byte(`"` + *sum + `":`)
	}

	due := make(chan time.Time, 1<<20)
	samples := make(chan sample, 1<<16)
	var workers sync.WaitGroup
	for c := 0; c < *connections; c++ {
		workers.Add(1)
		go func(c int) {
			defer workers.Done()
			connection(*addr, requests, field, c, due, samples)
		}(c)
	}

	var collected []sample
	done := make(chan struct{})
	go func() {
		for s := range samples {
			collected = append(collected, s)
		}
		close(done)
	}()

	started := time.Now()
	end := started.Add(time.Duration((*warmup + *seconds) * float64(time.Second)))
	if *rate <= 0 {
		for i := 0; i < 2**connections; i++ {
			due <- time.Now()
		}
		for time.Now().Before(end) {
			for len(due) < *connections {
				due <- time.Now()
			}
			time.Sleep(200 * time.Microsecond)
		}
	} else {
		interval := time.Duration(float64(time.Second) / *rate)
		sent := 0
		for {
			now := time.Now()
			if !now.Before(end) {
				break
			}
			for next := started.Add(time.Duration(sent) * interval); !next.After(now); next = started.Add(time.Duration(sent) * interval) {
				due <- next
				sent++
			}
			time.Sleep(time.Until(started.Add(time.Duration(sent) * interval)))
		}
	}
	// Requests still queued were never sent: drop them, then let every connection end.
	for len(due) > 0 {
		<-due
	}
	close(due)
	workers.Wait()
	close(samples)
	<-done

	measuredFrom := started.Add(time.Duration(*warmup * float64(time.Second)))
	out := result{Elapsed: time.Since(started).Seconds() - *warmup}
	for _, s := range collected {
		if s.due.Before(measuredFrom) {
			continue
		}
		if s.err != "" {
			out.Errors++
			if out.FirstErr == "" {
				out.FirstErr = s.err
			}
			continue
		}
		out.Requests++
		out.Summed += s.summed
		if s.hit {
			out.CacheHits++
		}
		ms := float64(s.latency.Microseconds()) / 1000
		out.Latencies = append(out.Latencies, ms)
		if ms > *slowMs {
			out.Slow = append(out.Slow, [2]float64{float64(s.due.UnixMicro()) / 1e6, ms})
		}
	}
	sort.Slice(out.Slow, func(i, j int) bool { return out.Slow[i][0] < out.Slow[j][0] })
	sort.Float64s(out.Latencies)
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

// connection sends the requests due on one keep-alive connection, one at a time.
func connection(addr string, requests [][]byte, field []byte, turn int, due <-chan time.Time, samples chan<- sample) {
	var conn net.Conn
	var reader *bufio.Reader
	for intended := range due {
		if conn == nil {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				samples <- sample{due: intended, err: err.Error()}
				continue
			}
			conn, reader = c, bufio.NewReaderSize(c, 64<<10)
		}
		turn++
		status, body, closing, err := exchange(conn, reader, requests[turn%len(requests)])
		if err != nil || closing {
			conn.Close()
			conn = nil
		}
		if err != nil {
			samples <- sample{due: intended, err: err.Error()}
			continue
		}
		s := sample{due: intended, latency: time.Since(intended), hit: bytes.Contains(body, cacheHit)}
		if status != 200 {
			s.err = fmt.Sprintf("HTTP %d %.200s", status, body)
		} else if field != nil {
			s.summed = fieldValue(body, field)
		}
		samples <- s
	}
	if conn != nil {
		conn.Close()
	}
}

// exchange writes one request and reads its answer (a Content-Length body); closing says
// the server ends the connection after it (HTTP/1.0, or "Connection: close").
func exchange(conn net.Conn, reader *bufio.Reader, request []byte) (status int, body []byte, closing bool, err error) {
	if _, err = conn.Write(request); err != nil {
		return
	}
	line, err := reader.ReadString('\n')
	if err != nil {
		return
	}
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return 0, nil, true, fmt.Errorf("bad status line %q", line)
	}
	status, _ = strconv.Atoi(fields[1])
	closing = fields[0] == "HTTP/1.0"
	length := -1
	for {
		header, err := reader.ReadString('\n')
		if err != nil {
			return 0, nil, true, err
		}
		header = strings.TrimRight(header, "\r\n")
		if header == "" {
			break
		}
		name, value, _ := strings.Cut(header, ":")
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			length, _ = strconv.Atoi(value)
		case "connection":
			closing = strings.EqualFold(value, "close")
		}
	}
	if length < 0 {
		return 0, nil, true, fmt.Errorf("no content-length in the answer")
	}
	body = make([]byte, length)
	if _, err = io.ReadFull(reader, body); err != nil {
		return 0, nil, true, err
	}
	return status, body, closing, nil
}

// fieldValue is the integer after the first `"name":` in body (0 when there is none).
func fieldValue(body, field []byte) int64 {
	at := bytes.Index(body, field)
	if at < 0 {
		return 0
	}
	rest := bytes.TrimLeft(body[at+len(field):], " ")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, _ := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n
}

// readBodies reads records of "<length>\n<bytes>".
func readBodies(name string) ([][]byte, error) {
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var bodies [][]byte
	for len(raw) > 0 {
		line, rest, found := bytes.Cut(raw, []byte("\n"))
		n, err := strconv.Atoi(string(line))
		if !found || err != nil || n < 0 || n > len(rest) {
			return nil, fmt.Errorf("bad bodies file %s: a record's length %q", name, line)
		}
		bodies = append(bodies, rest[:n])
		raw = rest[n:]
	}
	if len(bodies) == 0 {
		return nil, fmt.Errorf("no bodies in %s", name)
	}
	return bodies, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}
