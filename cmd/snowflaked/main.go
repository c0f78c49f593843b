// Command snowflaked is the snowflake ID server. Every flag can
// also be set from the environment: --max-batch reads SNOWFLAKED_MAX_BATCH.
//
// Exit status: 0 after a clean stop (SIGTERM or SIGINT, also while the node
// still waits for ZooKeeper at start); 2 for bad flags or configuration
// (including a cache file of another identity or layout, a cluster in
// ZooKeeper with another layout, a cluster that does not exist without
// --create-cluster, and a cluster that requires a feature this release does
// not know); 1 for any other error, among them
// ZooKeeper unreachable at a first start (no cache file to serve from), the
// worker ID's lease held by another live process of the same node key, and
// the cache file in use by another process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/cliflag"
	"codeberg.org/snowflaked/snowflaked/internal/envflag"
	"codeberg.org/snowflaked/snowflaked/node"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

// Exit statuses.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("snowflaked", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg node.Config
	cfg.RegisterFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: snowflaked [flags]\n\nEvery flag may also be set as %s<FLAG> (upper case, dashes as underscores).\n\n", node.EnvPrefix)
		cliflag.PrintDefaults(fs.Output(), fs)
	}
	_, parseErr := cliflag.Parse(fs, args, false)
	if errors.Is(parseErr, flag.ErrHelp) {
		return cliflag.Report(stdout, stderr, fs, parseErr) // usage on stdout, exit 0
	}
	if parseErr == nil && *showVersion {
		fmt.Fprintln(stdout, versionString())
		return exitOK
	}
	var problems []string
	if parseErr != nil {
		problems = cliflag.Explain(fs, parseErr)
	}
	if parseErr == nil && fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q (flags only)", fs.Args()))
	}
	// The environment's problems are reported with the command line's; the
	// configuration is validated only once both are understood.
	unknown, err := envflag.Apply(fs, node.EnvPrefix, environ)
	if err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	if len(problems) == 0 {
		if err := cfg.Validate(); err != nil {
			problems = strings.Split(err.Error(), "\n")
		}
	}
	if len(problems) > 0 {
		return usageError(stderr, problems)
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return usageError(stderr, []string{err.Error()})
	}
	for _, name := range unknown {
		if node.ChaosBuild && name == node.ChaosClockOffsetEnv {
			continue // the chaos build's clock reads it (node/chaos_on.go)
		}
		log.Warn().Str("variable", name).Msg("environment variable matches no flag: ignored (typo?)")
	}
	// Libraries that log through the standard logger write JSON lines like
	// the rest: it is routed into the log before anything is started that
	// could use it. Nothing the binary links logs at init (the end-to-end
	// test TestIntegration_EveryLogLineIsJSON runs --help and --version).
	stdlog.SetFlags(0)
	stdlog.SetOutput(stdlogWriter{log.With().Str("component", "stdlib").Logger()})
	log.Info().Str("version", version).Msg("snowflaked " + versionString())

	cfg.Version = versionString()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := node.Run(ctx, cfg, log); err != nil {
		if errors.Is(err, node.ErrInvalidConfig) {
			log.Error().Err(err).Msg("bad configuration")
			return exitUsage
		}
		log.Error().Err(err).Msg("snowflaked failed")
		return exitRuntime
	}
	return exitOK
}

func versionString() string {
	s := fmt.Sprintf("%s (%s)", version, runtime.Version())
	if node.ChaosBuild {
		s += " chaos build: fault injection enabled, not for production"
	}
	return s
}

// isTerminal reports whether w is a character device (colours only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newLogger returns the process logger: JSON lines on stderr, or a
// human-readable console format, at --log-level.
func newLogger(cfg node.Config, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: %w", cfg.LogLevel, err)
	}
	setLogFormat()
	out := w
	if cfg.LogFormat == node.LogFormatConsole {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !isTerminal(w)}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger(), nil
}

// usageError writes each problem of a bad command line, environment or
// configuration as one JSON line on stderr, as every line the process
// writes there, and returns exitUsage.
func usageError(stderr io.Writer, problems []string) int {
	setLogFormat()
	log := zerolog.New(stderr).With().Timestamp().Logger()
	for _, p := range problems {
		log.Error().Str("error", p).Str("help", "snowflaked --help lists every flag").Msg("bad configuration")
	}
	return exitUsage
}

// setLogFormat sets how zerolog writes times and durations: RFC 3339 with
// nanoseconds, and durations as float milliseconds in fields named *_ms.
func setLogFormat() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	zerolog.DurationFieldUnit = time.Millisecond
	zerolog.DurationFieldInteger = false
}

// stdlogWriter turns the standard logger's lines into warnings of log.
type stdlogWriter struct{ log zerolog.Logger }

func (w stdlogWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
