package node

import "time"

// The moments around a reboot are where the local fence rules matter
// (docs/fencing.md, L1, L2, S3): a process that issued up to its fence,
// maybe while the fence write hung on its disk, is killed, and the next
// one starts on the same disk with its clock behind. The reboot step sends
// batches to the old process first (half the time while its disk hangs,
// so its clock runs into the fence being written) and to the new one as
// soon as it serves.

// beforeReboot sends a few batches to n's process, half the time while its
// disk writes hang for 1.5–4s.
func (s *snowSim) beforeReboot(n *snowNode) error {
	if s.rng.IntN(2) == 0 {
		d := time.Duration(1500+s.rng.IntN(2500)) * time.Millisecond
		n.proc.dproc.Hang(d)
		s.logf("%s: disk writes take %v", n.proc.name, d)
	}
	for range 3 {
		s.pause(time.Duration(100+s.rng.IntN(500)) * time.Millisecond)
		if err := s.issue(n); err != nil {
			return err
		}
	}
	return nil
}

// afterReboot waits (up to 3s) for n's new process to serve and sends it
// a batch.
func (s *snowSim) afterReboot(n *snowNode) error {
	for range 300 {
		if nd := n.proc.n.Load(); nd != nil && nd.srv != nil && nd.guard.Ready() {
			break
		}
		s.pause(10 * time.Millisecond)
	}
	return s.issue(n)
}
