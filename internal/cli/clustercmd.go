package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/usage"
)

// newCmdCluster builds `ralph cluster`: the coordinator's side of its
// workers' credentials.
func newCmdCluster(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Give each worker of `ralph coordinator` its own key, and revoke one",
		Long: `Manage the workers' keys of the coordinator of this repository
(` + "`ralph coordinator`" + `). Each worker gets its own key: the coordinator keeps
its public half in .ralph/` + cluster.KeysFile + `, the worker the secret half
(` + "`ralph worker --key FILE`" + `). Once the repository has a key, the coordinator's
NATS server admits workers by their keys only (no shared token), every
report a worker makes is signed with its key, and each landed commit names
the worker whose gates judged it (Ralph-Judged-By). Revoking a key shuts
that worker out at once, while the coordinator runs too: its connections
are closed, its reports refused, its job queued for another worker.`,
		Example: `  ralph cluster key add build-1 --out build-1.key
  ralph cluster key list
  ralph cluster key revoke build-1`,
		Args: cobra.NoArgs,
	}
	key := &cobra.Command{
		Use:   "key",
		Short: "Add, list and revoke the workers' keys",
		Example: `  ralph cluster key add build-1 --out build-1.key
  ralph cluster key revoke build-1`,
		Args: cobra.NoArgs,
	}
	key.AddCommand(newCmdClusterKeyAdd(f, nil), newCmdClusterKeyList(f, nil), newCmdClusterKeyRevoke(f, nil))
	cmd.AddCommand(key)
	return cmd
}

// keysPath is the keys file of the repository ralph runs in.
func keysPath(cmd *cobra.Command, f *Factory) (string, engine.Paths, error) {
	root, _, err := f.Repo(cmd.Context())
	if err != nil {
		return "", engine.Paths{}, err
	}
	p := engine.PathsFor(root)
	return filepath.Join(p.Dir, cluster.KeysFile), p, nil
}

// ClusterKeyAddOptions are `ralph cluster key add`'s settings.
type ClusterKeyAddOptions struct {
	IO   *Factory
	Name string
	Out  string // the key file to write ("" prints it)
}

func newCmdClusterKeyAdd(f *Factory, runF func(*ClusterKeyAddOptions) error) *cobra.Command {
	opts := &ClusterKeyAddOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Make a key for the worker NAME",
		Long: `Make a key for a new worker called NAME (letters, digits, - and _). The
coordinator keeps its public half; the secret half is written once, to
--out FILE (mode 0600; an existing file is never overwritten) or to the
standard output, and kept nowhere else: copy it to the worker's machine and
start the worker there with ` + "`ralph worker --key FILE`" + `. The worker is NAME in
the coordinator's log, ` + "`ralph status`" + ` and the Ralph-Judged-By trailer of the
commits it judged. A name once used stays taken, revoked or not. A
coordinator that runs admits the new key within a second.`,
		Example: `  ralph cluster key add build-1 --out build-1.key
  scp build-1.key build-1:ralph.key && ssh build-1 ralph worker --nats tls://coord.lan:4222 --key ralph.key`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runClusterKeyAdd(cmd, opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "out", "o", "", "write the worker's key to `FILE` (mode 0600) instead of the standard output")
	return cmd
}

func runClusterKeyAdd(cmd *cobra.Command, o *ClusterKeyAddOptions) error {
	path, p, err := keysPath(cmd, o.IO)
	if err != nil {
		return err
	}
	if why := engine.FromIteration(p); why != "" {
		return usage.Errorf("ralph cluster key add was called from inside an iteration (%s); refused: a worker's key comes from a person", why)
	}
	if err := cluster.CheckKeyName(o.Name); err != nil {
		return usage.Errorf("%v", err)
	}
	var out *os.File
	if o.Out != "" {
		// Made first, exclusively: an existing file (another worker's key)
		// is never overwritten, and a key is recorded only once its file
		// can hold it.
		if out, err = os.OpenFile(o.Out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			if errors.Is(err, os.ErrExist) {
				return usage.Errorf("--out %s exists: give a new file (a key is never written over another)", o.Out)
			}
			return usage.Errorf("--out: %v", err)
		}
	}
	k, secret, err := cluster.AddKey(path, o.Name, time.Now())
	if err != nil {
		if out != nil {
			out.Close()
			os.Remove(o.Out)
		}
		return usage.Errorf("%v", err)
	}
	ioStreams := o.IO.IO
	if out == nil {
		_, err = ioStreams.Out.Write(secret)
		if err == nil {
			fmt.Fprintf(ioStreams.ErrOut, "ralph: worker key %s made (public key %s): the secret above is shown once; save it on the worker's machine, mode 0600, and start the worker with `ralph worker --key FILE`\n", k.Name, k.Public)
		}
		return err
	}
	if _, err := out.Write(secret); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	fmt.Fprintf(ioStreams.ErrOut, "ralph: worker key %s made (public key %s), its secret in %s: copy it to the worker's machine (mode 0600) and start the worker with `ralph worker --key FILE`\n", k.Name, k.Public, o.Out)
	return nil
}

// ClusterKeyListOptions are `ralph cluster key list`'s settings.
type ClusterKeyListOptions struct {
	IO   *Factory
	JSON bool
}

func newCmdClusterKeyList(f *Factory, runF func(*ClusterKeyListOptions) error) *cobra.Command {
	opts := &ClusterKeyListOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workers' keys, revoked ones too",
		Example: `  ralph cluster key list
  ralph cluster key list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runClusterKeyList(cmd, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the keys as JSON")
	return cmd
}

func runClusterKeyList(cmd *cobra.Command, o *ClusterKeyListOptions) error {
	path, _, err := keysPath(cmd, o.IO)
	if err != nil {
		return err
	}
	keys, err := cluster.ReadKeys(path)
	if err != nil {
		return usage.Errorf("%v", err)
	}
	out := o.IO.IO.Out
	if o.JSON {
		if keys == nil {
			keys = []cluster.WorkerKey{}
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(keys)
	}
	if len(keys) == 0 {
		fmt.Fprintf(o.IO.IO.ErrOut, "ralph: no worker keys (%s): the coordinator admits workers by its token; `ralph cluster key add NAME` makes one\n", path)
		return nil
	}
	fmt.Fprintf(out, "%-20s %-10s %-12s %s\n", "NAME", "STATE", "ADDED", "PUBLIC KEY")
	for _, k := range keys {
		state := "active"
		if k.Revoked != nil {
			state = "revoked " + k.Revoked.Local().Format(time.DateOnly)
		}
		fmt.Fprintf(out, "%-20s %-10s %-12s %s\n", k.Name, state, k.Added.Local().Format(time.DateOnly), k.Public)
	}
	return nil
}

// ClusterKeyRevokeOptions are `ralph cluster key revoke`'s settings.
type ClusterKeyRevokeOptions struct {
	IO   *Factory
	Name string
}

func newCmdClusterKeyRevoke(f *Factory, runF func(*ClusterKeyRevokeOptions) error) *cobra.Command {
	opts := &ClusterKeyRevokeOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke the worker NAME's key: the worker is refused at once",
		Long: `Revoke the key of the worker NAME. A coordinator that runs refuses the
worker within a second: its connections to the embedded NATS server are
closed and further ones refused (the worker stops, saying so), any report
it makes is not counted, and the job it held is queued for another worker.
The key stays listed as revoked; its name is never given to another key.`,
		Example: `  ralph cluster key revoke build-1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runClusterKeyRevoke(cmd, opts)
		},
	}
	return cmd
}

func runClusterKeyRevoke(cmd *cobra.Command, o *ClusterKeyRevokeOptions) error {
	path, _, err := keysPath(cmd, o.IO)
	if err != nil {
		return err
	}
	k, already, err := cluster.RevokeKey(path, o.Name, time.Now())
	if err != nil {
		return usage.Errorf("%v", err)
	}
	if already {
		fmt.Fprintf(o.IO.IO.ErrOut, "ralph: worker key %s was revoked already (%s)\n", k.Name, k.Revoked.Local().Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(o.IO.IO.ErrOut, "ralph: worker key %s revoked: a coordinator that runs refuses the worker within a second\n", k.Name)
	return nil
}
