package snowflake_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// testNow is the "now" every layout test validates against.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const defaultEpochText = "2024-01-01T00:00:00Z"

// defaultWith returns DefaultLayout changed by f.
func defaultWith(f func(*snowflake.Layout)) snowflake.Layout {
	l := snowflake.DefaultLayout()
	f(&l)
	return l
}

// checkInvalidLayout checks that a non-nil err wraps ErrInvalidLayout and
// contains want.
func checkInvalidLayout(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, snowflake.ErrInvalidLayout) {
		t.Errorf("error %v does not wrap ErrInvalidLayout", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

func TestParseBits(t *testing.T) {
	tests := []struct {
		in      string
		t, w, s uint
		wantErr string // substring of the error; "" means success
	}{
		{in: "41/10/12", t: 41, w: 10, s: 12},
		{in: " 41 / 10 / 12 ", t: 41, w: 10, s: 12},
		{in: "default", t: 41, w: 10, s: 12},
		{in: "DEFAULT", t: 41, w: 10, s: 12},
		{in: "js53", t: 41, w: 5, s: 7},
		{in: " JS53 ", t: 41, w: 5, s: 7},
		{in: "41/0/22", t: 41, w: 0, s: 22},
		{in: "39/16/8", t: 39, w: 16, s: 8},
		{in: "0/0/0", t: 0, w: 0, s: 0}, // syntax only: Validate rejects it
		{in: "63/63/63", t: 63, w: 63, s: 63},
		{in: "", wantErr: "want time/worker/sequence"},
		{in: "41/10", wantErr: "want time/worker/sequence"},
		{in: "41/10/12/1", wantErr: "want time/worker/sequence"},
		{in: "41 10 12", wantErr: "want time/worker/sequence"},
		{in: "js54", wantErr: "want time/worker/sequence"},
		{in: "a/b/c", wantErr: `"a" is not a bit count`},
		{in: "-1/10/12", wantErr: `"-1" is not a bit count`},
		{in: "64/0/0", wantErr: `"64" is not a bit count`},
		{in: "256/0/0", wantErr: `"256" is not a bit count`},
		{in: "41//12", wantErr: `"" is not a bit count`},
		{in: "41/10/12x", wantErr: `"12x" is not a bit count`},
		{in: "41/10/1.5", wantErr: `"1.5" is not a bit count`},
		{in: "41/+10/12", wantErr: `"+10" is not a bit count`},
		{in: "0x29/10/12", wantErr: `"0x29" is not a bit count`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			tb, wb, sb, err := snowflake.ParseBits(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseBits(%q) = %d/%d/%d, want an error containing %q", tc.in, tb, wb, sb, tc.wantErr)
				}
				checkInvalidLayout(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("ParseBits(%q): %v", tc.in, err)
			}
			if tb != tc.t || wb != tc.w || sb != tc.s {
				t.Errorf("ParseBits(%q) = %d/%d/%d, want %d/%d/%d", tc.in, tb, wb, sb, tc.t, tc.w, tc.s)
			}
		})
	}
}

func TestParseLayout(t *testing.T) {
	tests := []struct {
		name, bits, epoch, unit string
		want                    snowflake.Layout // checked when wantErr is ""
		wantErr                 string
	}{
		{name: "default", bits: "41/10/12", epoch: defaultEpochText, unit: "1ms", want: snowflake.DefaultLayout()},
		{name: "default preset", bits: "default", epoch: defaultEpochText, unit: "1ms", want: snowflake.DefaultLayout()},
		{name: "js53 preset", bits: "js53", epoch: defaultEpochText, unit: "1ms", want: snowflake.JS53Layout()},
		{name: "spaces", bits: " 41/10/12 ", epoch: " " + defaultEpochText + " ", unit: " 1ms ", want: snowflake.DefaultLayout()},
		{name: "epoch with offset is UTC", bits: "41/10/12", epoch: "2024-01-01T01:00:00+01:00", unit: "1ms", want: snowflake.DefaultLayout()},
		{
			name: "10ms unit", bits: "39/16/8", epoch: "2020-05-06T07:08:09.123Z", unit: "10ms",
			want: snowflake.Layout{TimeBits: 39, WorkerBits: 16, SequenceBits: 8, Epoch: time.Date(2020, 5, 6, 7, 8, 9, 123e6, time.UTC), Unit: 10 * time.Millisecond},
		},
		{
			name: "1s unit", bits: "31/10/22", epoch: defaultEpochText, unit: "1s",
			want: snowflake.Layout{TimeBits: 31, WorkerBits: 10, SequenceBits: 22, Epoch: snowflake.DefaultEpoch, Unit: time.Second},
		},
		{
			name: "1h unit", bits: "20/21/22", epoch: defaultEpochText, unit: "1h",
			want: snowflake.Layout{TimeBits: 20, WorkerBits: 21, SequenceBits: 22, Epoch: snowflake.DefaultEpoch, Unit: time.Hour},
		},
		{
			name: "63 bits", bits: "41/0/22", epoch: defaultEpochText, unit: "1ms",
			want: snowflake.Layout{TimeBits: 41, WorkerBits: 0, SequenceBits: 22, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond},
		},
		{name: "sum over 63", bits: "41/12/11", epoch: defaultEpochText, unit: "1ms", wantErr: "uses 64 bits, at most 63"},
		{name: "sum far over 63", bits: "63/63/63", epoch: defaultEpochText, unit: "1ms", wantErr: "uses 189 bits, at most 63"},
		{name: "zero sequence bits", bits: "41/22/0", epoch: defaultEpochText, unit: "1ms", wantErr: "no sequence bits"},
		{name: "too few time bits", bits: "19/10/12", epoch: defaultEpochText, unit: "1ms", wantErr: "19 time bits, fewer than 20"},
		{name: "zero time bits", bits: "0/10/12", epoch: defaultEpochText, unit: "1ms", wantErr: "0 time bits"},
		{name: "unit below 1ms", bits: "41/10/12", epoch: defaultEpochText, unit: "999us", wantErr: "below 1ms"},
		{name: "unit zero", bits: "41/10/12", epoch: defaultEpochText, unit: "0s", wantErr: "below 1ms"},
		{name: "unit negative", bits: "41/10/12", epoch: defaultEpochText, unit: "-1ms", wantErr: "below 1ms"},
		{name: "unit not whole ms", bits: "41/10/12", epoch: defaultEpochText, unit: "1500us", wantErr: "not a whole number of milliseconds"},
		{name: "unit above 1h", bits: "41/10/12", epoch: defaultEpochText, unit: "1h0m0.001s", wantErr: "above 1h"},
		{name: "unit 2h", bits: "41/10/12", epoch: defaultEpochText, unit: "2h", wantErr: "above 1h"},
		{name: "unit unparsable", bits: "41/10/12", epoch: defaultEpochText, unit: "fast", wantErr: `time unit "fast" is not a duration`},
		{name: "unit empty", bits: "41/10/12", epoch: defaultEpochText, unit: "", wantErr: `time unit "" is not a duration`},
		{name: "unit without suffix", bits: "41/10/12", epoch: defaultEpochText, unit: "1", wantErr: `time unit "1" is not a duration`},
		{name: "epoch date only", bits: "41/10/12", epoch: "2024-01-01", unit: "1ms", wantErr: `epoch "2024-01-01" is not an RFC 3339 time`},
		{name: "epoch empty", bits: "41/10/12", epoch: "", unit: "1ms", wantErr: `epoch "" is not an RFC 3339 time`},
		{name: "epoch junk", bits: "41/10/12", epoch: "yesterday", unit: "1ms", wantErr: "not an RFC 3339 time"},
		{name: "epoch unix seconds", bits: "41/10/12", epoch: "1704067200", unit: "1ms", wantErr: "not an RFC 3339 time"},
		{name: "epoch zero time", bits: "41/10/12", epoch: "0001-01-01T00:00:00Z", unit: "1ms", wantErr: "no epoch"},
		{name: "every field bad", bits: "50/x/12", epoch: "yesterday", unit: "fast", wantErr: "\"50/x/12\""},
		{name: "every field bad: epoch too", bits: "50/x/12", epoch: "yesterday", unit: "fast", wantErr: `epoch "yesterday" is not an RFC 3339 time`},
		{name: "every field bad: unit too", bits: "50/x/12", epoch: "yesterday", unit: "fast", wantErr: `time unit "fast" is not a duration`},
		{name: "epoch in the future", bits: "41/10/12", epoch: "2025-06-01T12:00:01Z", unit: "1ms", wantErr: "is in the future"},
		{name: "epoch 2100", bits: "41/10/12", epoch: "2100-01-01T00:00:00Z", unit: "1ms", wantErr: "is in the future"},
		{name: "epoch after 2262", bits: "41/10/12", epoch: "2999-01-01T00:00:00Z", unit: "1ms", wantErr: "too far in the future (after 2262-04-11T23:47:16.854Z)"},
		{name: "epoch before 1970", bits: "62/0/1", epoch: "1969-12-31T23:59:59.999Z", unit: "1h", wantErr: "is before 1970-01-01T00:00:00Z"},
		{name: "epoch year 1", bits: "62/0/1", epoch: "0001-01-01T00:00:00.001Z", unit: "1h", wantErr: "is before 1970"},
		{name: "epoch 1970", bits: "41/10/12", epoch: "1970-01-01T00:00:00Z", unit: "1s", want: snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: time.Unix(0, 0).UTC(), Unit: time.Second}},
		{name: "epoch sub-millisecond", bits: "41/10/12", epoch: "2024-01-01T00:00:00.0005Z", unit: "1ms", wantErr: "is not a whole millisecond"},
		{name: "epoch 1ns", bits: "41/10/12", epoch: "2024-01-01T00:00:00.000000001Z", unit: "1ms", wantErr: "is not a whole millisecond"},
		{name: "layout exhausted", bits: "20/10/12", epoch: defaultEpochText, unit: "1ms", wantErr: "ran out of timestamps"},
		{name: "layout exhausted 30 bits", bits: "30/10/12", epoch: defaultEpochText, unit: "1ms", wantErr: "ran out of timestamps"},
		{name: "junk bits 41/10", bits: "41/10", epoch: defaultEpochText, unit: "1ms", wantErr: "want time/worker/sequence"},
		{name: "junk bits a/b/c", bits: "a/b/c", epoch: defaultEpochText, unit: "1ms", wantErr: "is not a bit count"},
		{name: "junk bits 41/10/12/1", bits: "41/10/12/1", epoch: defaultEpochText, unit: "1ms", wantErr: "want time/worker/sequence"},
		{name: "junk bits -1/10/12", bits: "-1/10/12", epoch: defaultEpochText, unit: "1ms", wantErr: "is not a bit count"},
		{name: "junk bits 64/0/0", bits: "64/0/0", epoch: defaultEpochText, unit: "1ms", wantErr: "is not a bit count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := snowflake.ParseLayout(tc.bits, tc.epoch, tc.unit, testNow)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseLayout(%q, %q, %q) = %s, want an error containing %q", tc.bits, tc.epoch, tc.unit, l.Describe(), tc.wantErr)
				}
				checkInvalidLayout(t, err, tc.wantErr)
				if l != (snowflake.Layout{}) {
					t.Errorf("on error ParseLayout returned %s, want the zero Layout", l.Describe())
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLayout(%q, %q, %q): %v", tc.bits, tc.epoch, tc.unit, err)
			}
			if !l.Equal(tc.want) {
				t.Errorf("ParseLayout = %s, want %s", l.Describe(), tc.want.Describe())
			}
			if l.Epoch.Location() != time.UTC {
				t.Errorf("epoch location %v, want UTC", l.Epoch.Location())
			}
			if err := l.Validate(testNow); err != nil {
				t.Errorf("Validate of a parsed layout: %v", err)
			}
		})
	}
}

func TestLayoutValidate(t *testing.T) {
	ok := snowflake.DefaultLayout()
	tests := []struct {
		name    string
		l       snowflake.Layout
		now     time.Time
		wantErr string
	}{
		{name: "default", l: ok, now: testNow},
		{name: "js53", l: snowflake.JS53Layout(), now: testNow},
		{name: "now at the epoch", l: ok, now: snowflake.DefaultEpoch},
		{name: "now just before the end", l: ok, now: ok.End().Add(-time.Nanosecond)},
		{name: "now at the end", l: ok, now: ok.End(), wantErr: "ran out of timestamps"},
		{name: "now just before the epoch", l: ok, now: snowflake.DefaultEpoch.Add(-time.Nanosecond), wantErr: "is in the future"},
		{name: "zero layout", l: snowflake.Layout{}, now: testNow, wantErr: "no sequence bits"},
		{name: "no epoch", l: defaultWith(func(l *snowflake.Layout) { l.Epoch = time.Time{} }), now: testNow, wantErr: "no epoch"},
		{name: "no unit", l: defaultWith(func(l *snowflake.Layout) { l.Unit = 0 }), now: testNow, wantErr: "below 1ms"},
		{name: "unit 1ns", l: defaultWith(func(l *snowflake.Layout) { l.Unit = 1 }), now: testNow, wantErr: "below 1ms"},
		{name: "unit 1.5ms", l: defaultWith(func(l *snowflake.Layout) { l.Unit = 1500 * time.Microsecond }), now: testNow, wantErr: "not a whole number of milliseconds"},
		{name: "unit 61m", l: defaultWith(func(l *snowflake.Layout) { l.Unit = 61 * time.Minute }), now: testNow, wantErr: "above 1h"},
		{name: "64 bits", l: defaultWith(func(l *snowflake.Layout) { l.TimeBits = 42 }), now: testNow, wantErr: "uses 64 bits"},
		{name: "no sequence", l: defaultWith(func(l *snowflake.Layout) { l.SequenceBits = 0 }), now: testNow, wantErr: "no sequence bits"},
		{name: "19 time bits", l: defaultWith(func(l *snowflake.Layout) { l.TimeBits = 19 }), now: testNow, wantErr: "fewer than 20"},
		// The sum of the three is 43, but only because it wrapped around.
		{name: "worker bits wrap the sum", l: defaultWith(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits = 41, math.MaxUint-9 }), now: testNow, wantErr: "a bit count above 63"},
		{name: "time bits wrap the sum", l: defaultWith(func(l *snowflake.Layout) { l.TimeBits = math.MaxUint - 1 }), now: testNow, wantErr: "a bit count above 63"},
		{name: "sequence bits 64", l: snowflake.Layout{TimeBits: 0, SequenceBits: 64, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond}, now: testNow, wantErr: "a bit count above 63"},
		{name: "epoch before 1970", l: defaultWith(func(l *snowflake.Layout) { l.Epoch = time.Unix(-1, 0) }), now: testNow, wantErr: "is before 1970"},
		{name: "epoch sub-millisecond", l: defaultWith(func(l *snowflake.Layout) { l.Epoch = l.Epoch.Add(time.Microsecond) }), now: testNow, wantErr: "not a whole millisecond"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate(tc.now)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%s) of %s: %v", tc.now, tc.l.Describe(), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%s) of %s = nil, want an error containing %q", tc.now, tc.l.Describe(), tc.wantErr)
			}
			checkInvalidLayout(t, err, tc.wantErr)
		})
	}
}

func TestPresets(t *testing.T) {
	tests := []struct {
		name         string
		l            snowflake.Layout
		bits         string
		maxWorker    int64
		maxSeq       int64
		maxTick      int64
		maxID        int64
		perSecond    float64
		end          time.Time
		jsSafeMaxID  bool
		presetString string
	}{
		{
			name: "default", l: snowflake.DefaultLayout(), bits: "41/10/12",
			maxWorker: 1023, maxSeq: 4095, maxTick: 1<<41 - 1, maxID: math.MaxInt64, perSecond: 4096000,
			end:          snowflake.DefaultEpoch.Add(time.Duration(1<<41) * time.Millisecond),
			presetString: snowflake.PresetDefault,
		},
		{
			name: "js53", l: snowflake.JS53Layout(), bits: "41/5/7",
			maxWorker: 31, maxSeq: 127, maxTick: 1<<41 - 1, maxID: 1<<53 - 1, perSecond: 128000,
			end:         snowflake.DefaultEpoch.Add(time.Duration(1<<41) * time.Millisecond),
			jsSafeMaxID: true, presetString: snowflake.PresetJS53,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.l
			if got := l.String(); got != tc.bits {
				t.Errorf("String() = %q, want %q", got, tc.bits)
			}
			if !l.Epoch.Equal(snowflake.DefaultEpoch) || l.Unit != time.Millisecond {
				t.Errorf("epoch/unit = %s/%s, want %s/1ms", l.Epoch, l.Unit, snowflake.DefaultEpoch)
			}
			if err := l.Validate(testNow); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if got := l.MaxWorkerID(); got != tc.maxWorker {
				t.Errorf("MaxWorkerID() = %d, want %d", got, tc.maxWorker)
			}
			if got := l.MaxSequence(); got != tc.maxSeq {
				t.Errorf("MaxSequence() = %d, want %d", got, tc.maxSeq)
			}
			if got := l.MaxTick(); got != tc.maxTick {
				t.Errorf("MaxTick() = %d, want %d", got, tc.maxTick)
			}
			if got := l.MaxID(); got != tc.maxID {
				t.Errorf("MaxID() = %d, want %d", got, tc.maxID)
			}
			if got := l.PerSecond(); got != tc.perSecond {
				t.Errorf("PerSecond() = %v, want %v", got, tc.perSecond)
			}
			if got := l.End(); !got.Equal(tc.end) {
				t.Errorf("End() = %s, want %s", got, tc.end)
			}
			// The largest ID of all (max tick, worker, sequence) is MaxID.
			if got := l.Compose(l.MaxTick(), l.MaxWorkerID(), l.MaxSequence()); got != l.MaxID() {
				t.Errorf("Compose(max, max, max) = %d, want MaxID %d", got, l.MaxID())
			}
			if tc.jsSafeMaxID && l.MaxID() > 1<<53-1 {
				t.Errorf("MaxID() = %d is above 2^53-1 = %d", l.MaxID(), int64(1<<53-1))
			}
			tb, wb, sb, err := snowflake.ParseBits(tc.presetString)
			if err != nil || tb != l.TimeBits || wb != l.WorkerBits || sb != l.SequenceBits {
				t.Errorf("ParseBits(%q) = %d/%d/%d, %v; want %s", tc.presetString, tb, wb, sb, err, l)
			}
		})
	}
}

func TestLayoutDescribe(t *testing.T) {
	const want = "41/10/12 epoch 2024-01-01T00:00:00Z unit 1ms"
	if got := snowflake.DefaultLayout().Describe(); got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
}

func TestLayoutEqual(t *testing.T) {
	base := snowflake.DefaultLayout()
	tests := []struct {
		name string
		o    snowflake.Layout
		want bool
	}{
		{name: "same", o: snowflake.DefaultLayout(), want: true},
		{name: "same instant other zone", o: defaultWith(func(l *snowflake.Layout) { l.Epoch = l.Epoch.In(time.FixedZone("X", 3600)) }), want: true},
		{name: "time bits", o: defaultWith(func(l *snowflake.Layout) { l.TimeBits = 40 }), want: false},
		{name: "worker bits", o: defaultWith(func(l *snowflake.Layout) { l.WorkerBits = 9 }), want: false},
		{name: "sequence bits", o: defaultWith(func(l *snowflake.Layout) { l.SequenceBits = 11 }), want: false},
		{name: "epoch", o: defaultWith(func(l *snowflake.Layout) { l.Epoch = l.Epoch.Add(time.Millisecond) }), want: false},
		{name: "unit", o: defaultWith(func(l *snowflake.Layout) { l.Unit = 2 * time.Millisecond }), want: false},
		{name: "js53", o: snowflake.JS53Layout(), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := base.Equal(tc.o); got != tc.want {
				t.Errorf("Equal(%s) = %v, want %v", tc.o.Describe(), got, tc.want)
			}
			if got := tc.o.Equal(base); got != tc.want {
				t.Errorf("Equal is not symmetric for %s", tc.o.Describe())
			}
		})
	}
}

func TestLayoutJSON(t *testing.T) {
	tests := []struct {
		name string
		l    snowflake.Layout
		want string
	}{
		{name: "default", l: snowflake.DefaultLayout(), want: `{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}`},
		{name: "js53", l: snowflake.JS53Layout(), want: `{"layout":"41/5/7","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}`},
		{
			name: "10ms, ms epoch, zone",
			l:    snowflake.Layout{TimeBits: 39, WorkerBits: 16, SequenceBits: 8, Epoch: time.Date(2020, 5, 6, 9, 8, 9, 123e6, time.FixedZone("X", 2*3600)), Unit: 10 * time.Millisecond},
			want: `{"layout":"39/16/8","epoch":"2020-05-06T07:08:09.123Z","time_unit":"10ms"}`,
		},
		{
			name: "1h",
			l:    snowflake.Layout{TimeBits: 20, WorkerBits: 21, SequenceBits: 22, Epoch: snowflake.DefaultEpoch, Unit: time.Hour},
			want: `{"layout":"20/21/22","epoch":"2024-01-01T00:00:00Z","time_unit":"1h0m0s"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.l)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(b) != tc.want {
				t.Errorf("Marshal = %s, want %s", b, tc.want)
			}
			var got snowflake.Layout
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			if !got.Equal(tc.l) {
				t.Errorf("round trip = %s, want %s", got.Describe(), tc.l.Describe())
			}
			// Embedded in a larger document, by value and by pointer.
			type doc struct {
				Name   string            `json:"name"`
				Layout snowflake.Layout  `json:"layout"`
				Ptr    *snowflake.Layout `json:"ptr"`
			}
			in := doc{Name: "x", Layout: tc.l, Ptr: &tc.l}
			b, err = json.Marshal(in)
			if err != nil {
				t.Fatalf("Marshal doc: %v", err)
			}
			var out doc
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("Unmarshal doc %s: %v", b, err)
			}
			if out.Name != "x" || !out.Layout.Equal(tc.l) || out.Ptr == nil || !out.Ptr.Equal(tc.l) {
				t.Errorf("doc round trip = %+v, want layout %s", out, tc.l.Describe())
			}
		})
	}
}

func TestLayoutUnmarshalJSONErrors(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{name: "not json", in: `nope`, wantErr: "invalid"},
		{name: "array", in: `[1,2,3]`, wantErr: "cannot unmarshal"},
		{name: "number layout", in: `{"layout":41,"epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}`, wantErr: "cannot unmarshal"},
		{name: "empty object", in: `{}`, wantErr: "want time/worker/sequence"},
		{name: "bad bits", in: `{"layout":"64/0/0","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}`, wantErr: "is not a bit count"},
		{name: "over 63", in: `{"layout":"41/11/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}`, wantErr: "at most 63"},
		{name: "bad epoch", in: `{"layout":"41/10/12","epoch":"2024-01-01","time_unit":"1ms"}`, wantErr: "not an RFC 3339 time"},
		{name: "bad unit", in: `{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1us"}`, wantErr: "below 1ms"},
		{name: "missing unit", in: `{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z"}`, wantErr: "is not a duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := snowflake.JS53Layout()
			err := json.Unmarshal([]byte(tc.in), &l)
			if err == nil {
				t.Fatalf("Unmarshal(%s) = %s, want an error", tc.in, l.Describe())
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
			if !l.Equal(snowflake.JS53Layout()) {
				t.Errorf("failed Unmarshal changed the layout to %s", l.Describe())
			}
		})
	}
	// A future epoch is a shape-valid layout: Unmarshal accepts it, Validate does not.
	var l snowflake.Layout
	if err := json.Unmarshal([]byte(`{"layout":"41/10/12","epoch":"2100-01-01T00:00:00Z","time_unit":"1ms"}`), &l); err != nil {
		t.Fatalf("Unmarshal of a future epoch: %v", err)
	}
	if err := l.Validate(testNow); !errors.Is(err, snowflake.ErrInvalidLayout) {
		t.Errorf("Validate of a future epoch = %v, want ErrInvalidLayout", err)
	}
}

func TestLayoutEnd(t *testing.T) {
	tests := []struct {
		name string
		l    snowflake.Layout
		want time.Time
	}{
		{name: "default", l: snowflake.DefaultLayout(), want: time.Date(2093, 9, 6, 15, 47, 35, 552e6, time.UTC)},
		{
			name: "20 bits of 1ms",
			l:    snowflake.Layout{TimeBits: 20, WorkerBits: 10, SequenceBits: 12, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond},
			want: snowflake.DefaultEpoch.Add(1048576 * time.Millisecond),
		},
		{
			name: "39 bits of 10ms",
			l:    snowflake.Layout{TimeBits: 39, WorkerBits: 16, SequenceBits: 8, Epoch: snowflake.DefaultEpoch, Unit: 10 * time.Millisecond},
			want: snowflake.DefaultEpoch.Add(time.Duration(1<<39) * 10 * time.Millisecond),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.l.End()
			if !got.Equal(tc.want) {
				t.Errorf("End() = %s, want %s", got, tc.want)
			}
			if got.Location() != time.UTC {
				t.Errorf("End() location %v, want UTC", got.Location())
			}
			// The last tick starts before End and the one after it would start at End.
			if last := time.Unix(0, tc.l.TickStart(tc.l.MaxTick())); !last.Before(got) || !last.Add(tc.l.Unit).Equal(got) {
				t.Errorf("last tick starts %s, want End-%s = %s", last, tc.l.Unit, got.Add(-tc.l.Unit))
			}
		})
	}
}

// Layouts whose timestamps run past 2262 (the end of int64 Unix
// nanoseconds) still have an exact End and decode to the right time.
func TestLayoutLongLived(t *testing.T) {
	e := snowflake.DefaultEpoch
	tests := []struct {
		name     string
		l        snowflake.Layout
		wantEnd  time.Time
		lastTime time.Time // the time of the largest tick
	}{
		{
			name:     "41 bits of 1s",
			l:        snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: e, Unit: time.Second},
			wantEnd:  time.Unix(e.Unix()+1<<41, 0).UTC(),
			lastTime: time.Unix(e.Unix()+1<<41-1, 0).UTC(),
		},
		{
			name:     "41 bits of 10ms",
			l:        snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: e, Unit: 10 * time.Millisecond},
			wantEnd:  time.UnixMilli(e.UnixMilli() + 10<<41).UTC(),
			lastTime: time.UnixMilli(e.UnixMilli() + 10*(1<<41-1)).UTC(),
		},
		{
			name:     "41 bits of 1h", // ends in year ~250 million
			l:        snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: e, Unit: time.Hour},
			wantEnd:  time.Unix(e.Unix()+3600<<41, 0).UTC(),
			lastTime: time.Unix(e.Unix()+3600*(1<<41-1), 0).UTC(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.l.Validate(testNow); err != nil {
				t.Fatal(err)
			}
			if got := tc.l.End(); !got.Equal(tc.wantEnd) {
				t.Errorf("End() = %s, want %s", got, tc.wantEnd)
			}
			id := tc.l.Compose(tc.l.MaxTick(), 0, 1)
			p, err := tc.l.Decode(id)
			if err != nil {
				t.Fatalf("Decode(%d): %v", id, err)
			}
			if !p.Time.Equal(tc.lastTime) || p.Tick != tc.l.MaxTick() || p.Sequence != 1 {
				t.Errorf("Decode(%d) = %+v, want tick %d at %s", id, p, tc.l.MaxTick(), tc.lastTime)
			}
			if p.UnixMilli() != tc.lastTime.UnixMilli() {
				t.Errorf("UnixMilli() = %d, want %d", p.UnixMilli(), tc.lastTime.UnixMilli())
			}
		})
	}

	// 62 bits of hours: ticks run past any time.Time; End is still in the
	// far future and Decode says the late IDs are not decodable.
	l := snowflake.Layout{TimeBits: 62, WorkerBits: 0, SequenceBits: 1, Epoch: e, Unit: time.Hour}
	if err := l.Validate(testNow); err != nil {
		t.Fatal(err)
	}
	if end := l.End(); end.Year() < 1_000_000_000 {
		t.Errorf("End() of 2^62 hours = %s, want beyond year 1e9", end)
	}
	if p, err := l.Decode(l.MaxID()); !errors.Is(err, snowflake.ErrInvalidID) {
		t.Errorf("Decode(MaxID) of 2^62 hours = %+v, %v; want ErrInvalidID", p, err)
	}
	if p, err := l.Decode(l.Compose(1000, 0, 1)); err != nil || !p.Time.Equal(e.Add(1000*time.Hour)) {
		t.Errorf("Decode(tick 1000) of 2^62 hours = %+v, %v; want %s", p, err, e.Add(1000*time.Hour))
	}
}

// Methods of invalid layouts answer without panicking.
func TestLayoutInvalidNoPanic(t *testing.T) {
	for _, l := range []snowflake.Layout{
		{},
		{TimeBits: 41, WorkerBits: 10, SequenceBits: 12},
		{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: snowflake.DefaultEpoch, Unit: -time.Hour},
		{TimeBits: math.MaxUint, WorkerBits: math.MaxUint, SequenceBits: math.MaxUint, Epoch: time.Unix(-1<<40, 0), Unit: time.Nanosecond},
	} {
		if err := l.Validate(testNow); err == nil {
			t.Errorf("Validate(%s) = nil", l.Describe())
		}
		_ = l.End()
		_ = l.PerSecond()
		_ = l.MaxID()
		_, _ = l.Decode(1)
		_, _ = l.MarshalJSON()
	}
}

func TestLayoutPerSecond(t *testing.T) {
	tests := []struct {
		bits string
		unit time.Duration
		want float64
	}{
		{bits: "41/10/12", unit: time.Millisecond, want: 4096000},
		{bits: "41/5/7", unit: time.Millisecond, want: 128000},
		{bits: "41/0/22", unit: time.Millisecond, want: 4194304000},
		{bits: "39/16/8", unit: 10 * time.Millisecond, want: 25600},
		{bits: "31/10/22", unit: time.Second, want: 4194304},
		{bits: "31/10/22", unit: 2 * time.Second, want: 2097152},
		{bits: "20/21/22", unit: time.Hour, want: 4194304.0 / 3600},
	}
	for _, tc := range tests {
		t.Run(tc.bits+"@"+tc.unit.String(), func(t *testing.T) {
			l, err := snowflake.ParseLayout(tc.bits, defaultEpochText, tc.unit.String(), testNow)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.PerSecond(); math.Abs(got-tc.want) > 1e-9*tc.want {
				t.Errorf("PerSecond() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLayoutTickOf(t *testing.T) {
	l := snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: snowflake.DefaultEpoch, Unit: 10 * time.Millisecond}
	e := snowflake.DefaultEpoch.UnixNano()
	ms := int64(time.Millisecond)
	tests := []struct {
		name string
		ns   int64
		want int64
	}{
		{name: "epoch", ns: e, want: 0},
		{name: "epoch+1ns", ns: e + 1, want: 0},
		{name: "end of tick 0", ns: e + 10*ms - 1, want: 0},
		{name: "tick 1", ns: e + 10*ms, want: 1},
		{name: "epoch-1ns", ns: e - 1, want: -1},
		{name: "epoch-10ms", ns: e - 10*ms, want: -1},
		{name: "epoch-10ms-1ns", ns: e - 10*ms - 1, want: -2},
		{name: "one day", ns: e + 24*3600*1000*ms, want: 8640000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := l.TickOf(tc.ns)
			if got != tc.want {
				t.Fatalf("TickOf(epoch%+d) = %d, want %d", tc.ns-e, got, tc.want)
			}
			// The tick contains the instant: start <= ns < start+unit.
			if start := l.TickStart(got); start > tc.ns || tc.ns >= start+int64(l.Unit) {
				t.Errorf("TickStart(%d) = epoch%+d does not contain epoch%+d", got, start-e, tc.ns-e)
			}
		})
	}
}

func TestLayoutDecode(t *testing.T) {
	def, js := snowflake.DefaultLayout(), snowflake.JS53Layout()
	tenMs := snowflake.Layout{TimeBits: 39, WorkerBits: 16, SequenceBits: 8, Epoch: snowflake.DefaultEpoch, Unit: 10 * time.Millisecond}
	tests := []struct {
		name               string
		l                  snowflake.Layout
		tick, worker, seqn int64
	}{
		{name: "default zero", l: def},
		{name: "default tick 1", l: def, tick: 1},
		{name: "default worker 1", l: def, worker: 1},
		{name: "default seq 1", l: def, seqn: 1},
		{name: "default typical", l: def, tick: 47_000_000_000, worker: 513, seqn: 77},
		{name: "default max", l: def, tick: def.MaxTick(), worker: def.MaxWorkerID(), seqn: def.MaxSequence()},
		{name: "js53 max", l: js, tick: js.MaxTick(), worker: js.MaxWorkerID(), seqn: js.MaxSequence()},
		{name: "js53 typical", l: js, tick: 12345678901, worker: 17, seqn: 100},
		{name: "10ms", l: tenMs, tick: 4_700_000_000, worker: 65535, seqn: 255},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.l.Compose(tc.tick, tc.worker, tc.seqn)
			if id < 0 || id > tc.l.MaxID() {
				t.Fatalf("Compose = %d, outside 0..%d", id, tc.l.MaxID())
			}
			p, err := tc.l.Decode(id)
			if err != nil {
				t.Fatalf("Decode(%d): %v", id, err)
			}
			want := snowflake.Parts{
				ID: id, Tick: tc.tick, WorkerID: tc.worker, Sequence: tc.seqn,
				Time: tc.l.Epoch.Add(time.Duration(tc.tick) * tc.l.Unit),
			}
			if p.ID != want.ID || p.Tick != want.Tick || p.WorkerID != want.WorkerID || p.Sequence != want.Sequence || !p.Time.Equal(want.Time) {
				t.Errorf("Decode(%d) = %+v, want %+v", id, p, want)
			}
			if p.Time.Location() != time.UTC {
				t.Errorf("Decode time location %v, want UTC", p.Time.Location())
			}
			if got := p.UnixMilli(); got != want.Time.UnixMilli() {
				t.Errorf("UnixMilli() = %d, want %d", got, want.Time.UnixMilli())
			}
			if back := tc.l.Compose(p.Tick, p.WorkerID, p.Sequence); back != id {
				t.Errorf("Compose(Decode(%d)) = %d", id, back)
			}
		})
	}
}

func TestLayoutDecodeInvalid(t *testing.T) {
	tests := []struct {
		name string
		l    snowflake.Layout
		id   int64
	}{
		{name: "default -1", l: snowflake.DefaultLayout(), id: -1},
		{name: "default min int64", l: snowflake.DefaultLayout(), id: math.MinInt64},
		{name: "js53 -1", l: snowflake.JS53Layout(), id: -1},
		{name: "js53 2^53", l: snowflake.JS53Layout(), id: 1 << 53},
		{name: "js53 max int64", l: snowflake.JS53Layout(), id: math.MaxInt64},
		{name: "62-bit layout 2^62", l: snowflake.Layout{TimeBits: 40, WorkerBits: 10, SequenceBits: 12, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond}, id: 1 << 62},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.l.Decode(tc.id)
			if !errors.Is(err, snowflake.ErrInvalidID) {
				t.Fatalf("Decode(%d) = %+v, %v; want ErrInvalidID", tc.id, p, err)
			}
			if p != (snowflake.Parts{}) {
				t.Errorf("Decode(%d) returned %+v with its error, want zero Parts", tc.id, p)
			}
		})
	}
}

func TestPartsJSON(t *testing.T) {
	l := snowflake.DefaultLayout()
	p, err := l.Decode(l.Compose(1000, 3, 4))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"4194316292","tick":1000,"time":"2024-01-01T00:00:01Z","worker_id":3,"sequence":4}`
	if string(b) != want {
		t.Errorf("Marshal(Parts) = %s, want %s", b, want)
	}
}
