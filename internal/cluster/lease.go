package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// bucketLeases holds one lease per run: the coordinator that runs it.
const bucketLeases = "ralph_coordinators"

// Holder is a run's coordinator as its lease names it.
type Holder struct {
	ID      string    `json:"id"` // this coordinator's start, unique
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Dir     string    `json:"dir"`
	Expires time.Time `json:"expires"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s in %s", h.PID, h.Host, h.Dir)
}

// ErrLeaseHeld is the error of a coordinator whose run another one holds.
var ErrLeaseHeld = errors.New("the run has a coordinator")

// Lease is a coordinator's hold on its run, in a key-value bucket: taken
// with compare-and-set, renewed before it runs out. A second coordinator
// of the same run is refused, naming the holder; it takes over only once
// the lease ran out, when the holder is a process of this machine that is
// gone, or when told to (takeOver).
type Lease struct {
	kv   jetstream.KeyValue
	run  string
	me   Holder
	rev  uint64
	ttl  time.Duration
	lost chan struct{}
}

// Acquire takes the lease of run for me, for ttl.
func Acquire(ctx context.Context, js jetstream.JetStream, run string, me Holder, ttl time.Duration, takeOver bool) (*Lease, *Holder, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucketLeases, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, nil, err
	}
	l := &Lease{kv: kv, run: run, me: me, ttl: ttl, lost: make(chan struct{})}
	for try := 0; try < 5; try++ {
		me.Expires = time.Now().Add(ttl).UTC()
		b, _ := json.Marshal(me)
		e, err := kv.Get(ctx, run)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if l.rev, err = kv.Create(ctx, run, b); err == nil {
				return l, nil, nil
			}
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another took it first: look again
			}
			return nil, nil, err
		}
		if err != nil {
			return nil, nil, err
		}
		var h Holder
		if json.Unmarshal(e.Value(), &h) != nil {
			h = Holder{}
		}
		var before *Holder
		if h.ID != "" && h.ID != me.ID {
			before = &h
			if !takeOver && time.Now().Before(h.Expires) && !gone(h) {
				return nil, &h, fmt.Errorf("%w: %s holds it until %s", ErrLeaseHeld, h, h.Expires.Local().Format("2006-01-02 15:04:05 MST"))
			}
		}
		if l.rev, err = kv.Update(ctx, run, b, e.Revision()); err == nil {
			return l, before, nil
		}
		// Someone wrote since: look again.
	}
	return nil, nil, errors.New("the run's lease kept changing under this coordinator: another one is starting")
}

// gone reports whether the holder is a process of this machine that no
// longer runs (a coordinator killed with -9 and started again).
func gone(h Holder) bool {
	host, _ := os.Hostname()
	if h.Host != host || h.PID <= 0 {
		return false
	}
	return syscall.Kill(h.PID, 0) == syscall.ESRCH
}

// Keep renews the lease until ctx ends, then gives it up. Lost is closed
// when another coordinator took it (or it ran out while NATS could not be
// reached): this one must stop touching the run.
func (l *Lease) Keep(ctx context.Context) {
	every := l.ttl / 3
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		me := l.me
		me.Expires = time.Now().Add(l.ttl).UTC()
		b, _ := json.Marshal(me)
		rev, err := l.kv.Update(ctx, l.run, b, l.rev)
		if err == nil {
			l.rev, l.me = rev, me
			continue
		}
		if ctx.Err() != nil {
			return
		}
		var apiErr *jetstream.APIError
		if (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) || time.Now().After(l.me.Expires) {
			close(l.lost)
			return
		}
	}
}

// Lost is closed once the lease is lost.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Holder is who holds the lease now (after it was lost: the successor).
func (l *Lease) Holder(ctx context.Context) (Holder, error) {
	e, err := l.kv.Get(ctx, l.run)
	if err != nil {
		return Holder{}, err
	}
	var h Holder
	err = json.Unmarshal(e.Value(), &h)
	return h, err
}

// Release gives the lease up (a run that ended: the next coordinator
// starts at once).
func (l *Lease) Release(ctx context.Context) {
	select {
	case <-l.lost:
		return
	default:
	}
	_ = l.kv.Delete(ctx, l.run, jetstream.LastRevision(l.rev))
}
