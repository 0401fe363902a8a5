package cluster

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/ralph-loop/ralph/internal/store"
)

// Worker keys are each worker's own credential: an ed25519 key pair (a
// NATS user nkey) made by `ralph cluster key add NAME` on the
// coordinator's machine. The coordinator keeps only the public half, in
// KeysFile; the worker keeps the seed (`ralph worker --key FILE`). With
// the embedded NATS server the key is how a worker logs in (no shared
// token then), and every report a worker stores is signed with it: the
// coordinator counts a report only when it names a key that is not
// revoked and the signature holds, so a worker's name on a commit is the
// key's, and revoking one key shuts out one worker at once.

// KeysFile is the coordinator's list of worker keys, in its .ralph folder.
const KeysFile = "worker-keys.json"

// WorkerKey is one worker's key as the coordinator knows it.
type WorkerKey struct {
	Name    string     `json:"name"`
	Public  string     `json:"public"` // the public nkey (U…)
	Added   time.Time  `json:"added"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

type keysDoc struct {
	Keys []WorkerKey `json:"keys"`
}

var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// CheckKeyName says why name cannot name a worker key (nil when it can):
// it is a NATS key, a git trailer's value and a file name.
func CheckKeyName(name string) error {
	if !keyName.MatchString(name) {
		return fmt.Errorf("worker key name %q: use letters, digits, - and _ (at most 63, starting with a letter or digit)", name)
	}
	return nil
}

// ReadKeys reads the keys in path (none when there is no file).
func ReadKeys(path string) ([]WorkerKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc keysDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, k := range doc.Keys {
		if CheckKeyName(k.Name) != nil || !nkeys.IsValidPublicUserKey(k.Public) {
			return nil, fmt.Errorf("%s: key %d (%q) is not a worker key (a name and a public user nkey)", path, i+1, k.Name)
		}
	}
	return doc.Keys, nil
}

// changeKeys reads, changes and writes the keys file under its lock.
func changeKeys(path string, change func([]WorkerKey) ([]WorkerKey, error)) error {
	return store.WithLock(path+".lock", func() error {
		keys, err := ReadKeys(path)
		if err != nil {
			return err
		}
		if keys, err = change(keys); err != nil {
			return err
		}
		b, err := json.MarshalIndent(keysDoc{Keys: keys}, "", "  ")
		if err != nil {
			return err
		}
		return store.WriteFile(path, append(b, '\n'), 0o600)
	})
}

// AddKey makes a key for the worker called name, records its public half
// in path, and returns the key file's bytes for the worker (its secret,
// shown once: the coordinator keeps no copy). A name once used stays
// taken, revoked or not: a name on a commit names one key.
func AddKey(path, name string, now time.Time) (WorkerKey, []byte, error) {
	if err := CheckKeyName(name); err != nil {
		return WorkerKey{}, nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return WorkerKey{}, nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return WorkerKey{}, nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return WorkerKey{}, nil, err
	}
	k := WorkerKey{Name: name, Public: pub, Added: now.UTC()}
	err = changeKeys(path, func(keys []WorkerKey) ([]WorkerKey, error) {
		for _, o := range keys {
			if o.Name == name {
				state := "in use"
				if o.Revoked != nil {
					state = "revoked on " + o.Revoked.Format(time.DateOnly)
				}
				return nil, fmt.Errorf("%s: a worker key named %s exists (%s): choose another name", path, name, state)
			}
		}
		return append(keys, k), nil
	})
	if err != nil {
		return WorkerKey{}, nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ralph worker key %q, made %s.\n", name, now.UTC().Format(time.DateOnly))
	fmt.Fprintf(&b, "# A secret: keep it on the worker's machine only (mode 0600) and start the worker with\n")
	fmt.Fprintf(&b, "# `ralph worker --key FILE`. Revoke it on the coordinator: `ralph cluster key revoke %s`.\n", name)
	fmt.Fprintf(&b, "%s %s\n", name, seed)
	return k, b.Bytes(), nil
}

// RevokeKey marks the key called name revoked (already: it was, at the
// key's Revoked time). A coordinator that runs refuses the worker at once:
// it closes the worker's connections to the embedded server and counts
// none of its reports.
func RevokeKey(path, name string, now time.Time) (k WorkerKey, already bool, err error) {
	err = changeKeys(path, func(keys []WorkerKey) ([]WorkerKey, error) {
		var names []string
		for i := range keys {
			if keys[i].Name != name {
				names = append(names, keys[i].Name)
				continue
			}
			if keys[i].Revoked != nil {
				already = true
			} else {
				t := now.UTC()
				keys[i].Revoked = &t
			}
			k = keys[i]
			return keys, nil
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: no worker key named %s (there are none: `ralph cluster key add NAME` makes one)", path, name)
		}
		return nil, fmt.Errorf("%s: no worker key named %s (the keys: %s)", path, name, strings.Join(names, ", "))
	})
	return k, already, err
}

// Key is a worker's own key, read from its key file.
type Key struct {
	Name   string
	Public string
	pair   nkeys.KeyPair
}

// ReadKeyFile reads a worker's key file: one line "NAME SEED" (comments
// aside). A file others can read is refused, as ssh refuses a private
// key: the seed is the worker's identity.
func ReadKeyFile(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s can be read by others (mode %04o): a worker key is a secret; chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := store.ReadFileLimit(path, 64<<10)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || CheckKeyName(f[0]) != nil {
			return nil, fmt.Errorf("%s:%d: not a ralph worker key (want the file `ralph cluster key add NAME` writes)", path, n)
		}
		kp, err := nkeys.FromSeed([]byte(f[1]))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a ralph worker key: %v", path, n, err)
		}
		pub, err := kp.PublicKey()
		if err != nil || !nkeys.IsValidPublicUserKey(pub) {
			return nil, fmt.Errorf("%s:%d: not a worker's user key", path, n)
		}
		return &Key{Name: f[0], Public: pub, pair: kp}, nil
	}
	return nil, fmt.Errorf("%s: no key in it (want the file `ralph cluster key add NAME` writes)", path)
}

// Sign signs b (a NATS server's nonce, a report).
func (k *Key) Sign(b []byte) ([]byte, error) { return k.pair.Sign(b) }

// Keyring is the coordinator's live view of its worker keys: Refresh
// reads the file again when it changed, so a revocation counts within a
// refresh.
type Keyring struct {
	Path string
	mu   sync.Mutex
	keys []WorkerKey
	seen fileStamp
}

type fileStamp struct {
	size  int64
	mtime time.Time
	ok    bool
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: fi.Size(), mtime: fi.ModTime(), ok: true}
}

// OpenKeyring reads the keys in path.
func OpenKeyring(path string) (*Keyring, error) {
	r := &Keyring{Path: path}
	if _, err := r.Refresh(); err != nil {
		return nil, err
	}
	return r, nil
}

// Refresh reads the file again when it changed; changed says it did. A
// file that cannot be read keeps the keys as they were (the error says
// why).
func (r *Keyring) Refresh() (changed bool, err error) {
	st := stamp(r.Path)
	r.mu.Lock()
	same := st == r.seen
	r.mu.Unlock()
	if same {
		return false, nil
	}
	keys, err := ReadKeys(r.Path)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed = !slices.EqualFunc(keys, r.keys, sameKey)
	r.keys, r.seen = keys, st
	return changed, nil
}

func sameKey(a, b WorkerKey) bool {
	return a.Name == b.Name && a.Public == b.Public && (a.Revoked == nil) == (b.Revoked == nil)
}

// Any reports whether there is any key (revoked ones too): then workers
// log in and sign with keys, and the shared token admits none.
func (r *Keyring) Any() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys) > 0
}

// Active are the public keys not revoked.
func (r *Keyring) Active() []WorkerKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []WorkerKey
	for _, k := range r.keys {
		if k.Revoked == nil {
			out = append(out, k)
		}
	}
	return out
}

// Revoked reports whether name is a key that was revoked.
func (r *Keyring) Revoked(name string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.keys {
		if k.Name == name {
			return k.Revoked != nil
		}
	}
	return false
}

// Verify says why sig is not name's signature of b (nil when it is).
func (r *Keyring) Verify(name string, b []byte, sig string) error {
	r.mu.Lock()
	var key *WorkerKey
	for i := range r.keys {
		if r.keys[i].Name == name {
			k := r.keys[i]
			key = &k
		}
	}
	r.mu.Unlock()
	switch {
	case key == nil:
		return fmt.Errorf("no worker key is named %s", name)
	case key.Revoked != nil:
		return fmt.Errorf("worker %s's key was revoked on %s", name, key.Revoked.Format(time.RFC3339))
	case sig == "":
		return fmt.Errorf("the report is not signed (the run wants every worker's own key)")
	}
	raw, err := base64.RawStdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("the report's signature is not base64")
	}
	pub, err := nkeys.FromPublicKey(key.Public)
	if err != nil {
		return err
	}
	if pub.Verify(b, raw) != nil {
		return fmt.Errorf("its signature does not hold for worker %s's key", name)
	}
	return nil
}

// NewKey is a fresh key that no file holds: the coordinator's own, for
// its connection to the server it embeds, gone with the process.
func NewKey(name string) (*Key, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	return &Key{Name: name, Public: pub, pair: kp}, nil
}

// signOutcome signs o with k (no key: unsigned).
func (k *Key) signOutcome(o *outcome) error {
	if k == nil {
		return nil
	}
	sig, err := k.Sign(o.signed())
	if err != nil {
		return err
	}
	o.Sig = base64.RawStdEncoding.EncodeToString(sig)
	return nil
}
