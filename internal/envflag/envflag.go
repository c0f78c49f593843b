// Package envflag lets every command-line flag also be set from the
// environment: --max-batch reads SNOWFLAKED_MAX_BATCH. A flag given on the
// command line wins over the environment.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"

	"codeberg.org/snowflaked/snowflaked/internal/cliflag"
)

// errBadValue is wrapped by every error about an environment variable whose
// value its flag does not accept.
var errBadValue = errors.New("bad value in environment")

// VarName returns the environment variable that sets flag name under prefix:
// upper case, dashes become underscores (VarName("SNOWFLAKED_", "max-batch")
// is "SNOWFLAKED_MAX_BATCH").
func VarName(prefix, name string) string {
	return normPrefix(prefix) + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// normPrefix makes sure a non-empty prefix ends with an underscore, so
// "SNOWFLAKED" and "SNOWFLAKED_" mean the same.
func normPrefix(prefix string) string {
	if prefix != "" && !strings.HasSuffix(prefix, "_") {
		return prefix + "_"
	}
	return prefix
}

// Apply sets every flag of fs that was not set on the command line from its
// environment variable (see VarName), if present in environ (KEY=VALUE
// entries, as os.Environ returns them; when a key repeats, the first wins,
// as with os.Getenv). Call it after fs.Parse. prefix is e.g. "SNOWFLAKED_"
// (a missing trailing underscore is added); it must not be empty.
//
// A value the flag rejects gives an error wrapping errBadValue that names
// the variable, the value and what the flag wants (cliflag.Want); all such
// errors are reported together.
// unknown lists, sorted, the variables that carry the prefix but match no
// flag, so the caller can warn about typos.
func Apply(fs *flag.FlagSet, prefix string, environ []string) (unknown []string, err error) {
	if prefix == "" {
		return nil, errors.New("envflag: empty prefix would read the whole environment")
	}
	prefix = normPrefix(prefix)
	byVar := map[string]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) { byVar[VarName(prefix, f.Name)] = f })
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	seen := map[string]bool{}
	var errs []error
	for _, kv := range environ {
		key, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(key, prefix) || seen[key] {
			continue
		}
		seen[key] = true
		f, known := byVar[key]
		switch {
		case !known:
			unknown = append(unknown, key)
		case onCommandLine[f.Name]:
			// The command line wins.
		default:
			if err := fs.Set(f.Name, val); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s=%q (for --%s): %s", errBadValue, key, val, f.Name, cliflag.Want(f.Value, err)))
			}
		}
	}
	sort.Strings(unknown)
	return unknown, errors.Join(errs...)
}
