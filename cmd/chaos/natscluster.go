package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startNATSCluster starts the three servers of --nats-cluster (s1, s2, s3:
// one cluster over loopback routes, JetStream on each with a store of its
// own) and waits until JetStream answers through them; it returns the
// nodes' URL list.
func (c *cluster) startNATSCluster(ctx context.Context) (string, error) {
	var clientPorts, routePorts []int
	for range 3 {
		p, err := freePort("tcp")
		if err != nil {
			return "", err
		}
		r, err := freePort("tcp")
		if err != nil {
			return "", err
		}
		clientPorts, routePorts = append(clientPorts, p), append(routePorts, r)
	}
	routes := make([]string, 3)
	urls := make([]string, 3)
	for i := range 3 {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i])
		c.natsClAt = append(c.natsClAt, fmt.Sprintf("127.0.0.1:%d", clientPorts[i]))
		urls[i] = "nats://" + c.natsClAt[i]
	}
	for i := range 3 {
		name := "s" + strconv.Itoa(i+1)
		p := &proc{name: "nats-" + name, bin: c.cfg.NATSServer, logPath: filepath.Join(c.cfg.Out, "nats-"+name+".log"),
			args: []string{"-a", "127.0.0.1", "-p", strconv.Itoa(clientPorts[i]), "-n", name, "--cluster_name", "chaos",
				"-cluster", routes[i], "-routes", strings.Join(routes, ","), "-js", "-sd", filepath.Join(c.cfg.Out, "nats-store-"+name)}}
		if err := p.start(); err != nil {
			return "", err
		}
		c.natsCl = append(c.natsCl, p)
	}
	for _, at := range c.natsClAt {
		if err := waitTCP(ctx, at, 30*time.Second); err != nil {
			return "", err
		}
	}
	url := strings.Join(urls, ",")
	if err := waitJetStream(ctx, url, 30*time.Second); err != nil {
		return "", err
	}
	c.logf("nats cluster s1-s3 ready (%s)", url)
	return url, nil
}

// waitJetStream waits until JetStream answers an account query through
// url: the cluster elected its meta leader (a zoned started before that
// fails to make its buckets).
func waitJetStream(ctx context.Context, url string, d time.Duration) error {
	nc, err := nats.Connect(url, nats.Name("chaos-wait"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("jetstream not ready through %s within %v: %w", url, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// natsKill SIGKILLs the server that leads the zones bucket's stream (the
// renewals of every lease then go unanswered until the other two elect a
// leader) and starts it again, with its store, after --nats-outage.
func (c *cluster) natsKill(ctx context.Context, n int) Event {
	ev := Event{N: n, Action: ActNATSKill}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	leader, err := c.rec.StreamLeader(lctx, "KV_"+bucketZones)
	cancel()
	i := -1
	if err == nil {
		i, err = serverIndex(leader, len(c.natsCl))
	}
	if err != nil {
		ev.Err = "find the zones bucket's leader: " + err.Error()
		return ev
	}
	p := c.natsCl[i]
	ev.Node = p.name
	ev.At = time.Now()
	c.logf("event %d: SIGKILL %s (leads the zones bucket), back after %v", n, p.name, c.cfg.NATSOutage)
	if err := p.signal(syscall.SIGKILL, true); err != nil {
		ev.Err = err.Error()
		return ev
	}
	st, ok := p.wait(10 * time.Second)
	if !ok {
		ev.Err = "did not exit within 10s of SIGKILL"
		return ev
	}
	ev.Gone, ev.Status = time.Now(), st
	time.Sleep(c.cfg.NATSOutage)
	if err := p.start(); err != nil {
		ev.Err = err.Error()
		return ev
	}
	if err := waitTCP(ctx, c.natsClAt[i], 30*time.Second); err != nil {
		ev.Err = err.Error()
		return ev
	}
	ev.Back = time.Now()
	c.logf("event %d: %s back after %v", n, p.name, ev.Back.Sub(ev.At).Round(time.Millisecond))
	return ev
}

// serverIndex is the index of server name ("s1".."sN") among n.
func serverIndex(name string, n int) (int, error) {
	i, err := strconv.Atoi(strings.TrimPrefix(name, "s"))
	if err != nil || !strings.HasPrefix(name, "s") || i < 1 || i > n {
		return -1, errors.New("unknown server " + strconv.Quote(name))
	}
	return i - 1, nil
}
