//go:build mutation

package mutation

import "testing"

func TestSetAndRestore(t *testing.T) {
	const a, b Name = "a", "b"
	if Broken(a) || Broken(none) {
		t.Fatal("a mutation in force before any was set")
	}
	restoreA := Set(a)
	if !Broken(a) || Broken(b) {
		t.Fatalf("after Set(a): Broken(a)=%v Broken(b)=%v, want true false", Broken(a), Broken(b))
	}
	restoreB := Set(b)
	if Broken(a) || !Broken(b) {
		t.Fatalf("after Set(b): Broken(a)=%v Broken(b)=%v, want false true", Broken(a), Broken(b))
	}
	restoreB()
	if !Broken(a) {
		t.Fatal("restoring Set(b) did not bring a back")
	}
	restoreA()
	if Broken(a) || Broken(b) {
		t.Fatal("a mutation still in force after every restore")
	}
	if restore := Set(none); Broken(none) {
		t.Fatal("None breaks something")
	} else {
		restore()
	}
}
