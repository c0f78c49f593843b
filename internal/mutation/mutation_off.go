//go:build !mutation

package mutation

// Enabled reports whether this build can break rules (the mutation tag).
const Enabled = false

// Broken reports whether name is the mutation in force: never, in a build
// without the mutation tag.
func Broken(Name) bool { return false }
