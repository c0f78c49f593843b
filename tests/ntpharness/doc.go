// Package ntpharness provides NTP servers for tests: an in-process fake
// server whose clock offset, stratum and reachability a test controls at run
// time, and a real Debian chronyd on loopback, optionally run under
// libfaketime so that its clock is off by a known amount.
package ntpharness
