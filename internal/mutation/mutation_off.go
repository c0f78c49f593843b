//go:build !mutation

package mutation

// enabled reports whether this build can break rules (the mutation tag).
const enabled = false

// Broken reports whether name is the mutation in force: never, in a build
// without the mutation tag.
func Broken(Name) bool { return false }
