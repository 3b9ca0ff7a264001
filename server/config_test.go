package server

import (
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/schedule"
)

func TestDefaultConfigIsValid(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	require.NoError(t, cfg.Validate())
	require.Equal(t, "127.0.0.1:8080", cfg.Listen, "loopback until authentication is on")
	require.Equal(t, "./data", cfg.DataDir)
	require.Equal(t, "sync", cfg.Flush)
	require.Equal(t, ByteSize(1<<30), cfg.SegmentSize)
	require.Equal(t, ByteSize(4<<20), cfg.MaxMessageSize)
	require.True(t, cfg.AutoCreate)
	require.Len(t, cfg.DelayLevels, 18)
	require.Equal(t, 2*time.Hour, cfg.DelayLevels[17])
	require.Equal(t, 72*time.Hour, cfg.Retention)
	require.Equal(t, 0.85, cfg.DiskSendCeiling)
	require.Equal(t, 0.95, cfg.DiskSystemCeiling)
	require.Equal(t, 0.75, cfg.DiskMaxUsedRatio)
	require.False(t, cfg.DiskPressureDelete, "disk pressure never deletes unconsumed messages by default")
}

// TestFlagDefaultsCoverTags checks that every ${var} a flag tag uses has a
// value in FlagDefaults, and that each default prints back to the value
// DefaultConfig holds.
func TestFlagDefaultsCoverTags(t *testing.T) {
	t.Parallel()
	vars := DefaultConfig().FlagDefaults()
	ref := regexp.MustCompile(`\$\{(\w+)\}`)
	used := map[string]bool{}
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		for _, m := range ref.FindAllStringSubmatch(string(typ.Field(i).Tag), -1) {
			require.Contains(t, vars, m[1], "field %s", typ.Field(i).Name)
			used[m[1]] = true
		}
	}
	require.Len(t, used, len(vars), "every default is used by a tag")

	var size ByteSize
	require.NoError(t, size.UnmarshalText([]byte(vars["segment_size"])))
	require.Equal(t, DefaultConfig().SegmentSize, size)
	var levels DelayLevels
	require.NoError(t, levels.UnmarshalText([]byte(vars["delay_levels"])))
	require.Equal(t, DefaultConfig().DelayLevels, levels)
	require.Equal(t, schedule.DefaultLevels, vars["delay_levels"])
}

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	cfg := Config{DataDir: "/tmp/x", MaxWaiters: 7}.withDefaults()
	require.NoError(t, cfg.Validate())
	require.Equal(t, "/tmp/x", cfg.DataDir)
	require.Equal(t, 7, cfg.MaxWaiters)
	require.Equal(t, DefaultConfig().ReadHeaderTimeout, cfg.ReadHeaderTimeout)
	require.False(t, cfg.AutoCreate, "a boolean keeps its zero value")
}

// TestScrubRate: --scrub-rate 0 turns the scrubber off (the storage
// option's zero would be its default), and the default is the store's.
func TestScrubRate(t *testing.T) {
	t.Parallel()
	require.Equal(t, ByteSize(storage.DefaultScrubRate), DefaultConfig().ScrubRate)
	require.Negative(t, scrubRate(0))
	require.Equal(t, int64(4<<20), scrubRate(4<<20))
	require.Zero(t, Config{}.withDefaults().ScrubRate, "zero is meaningful: off")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"ListenWithoutPort", func(c *Config) { c.Listen = "localhost" }},
		{"EmptyDataDir", func(c *Config) { c.DataDir = "" }},
		{"BadFlush", func(c *Config) { c.Flush = "never" }},
		{"OTLPEndpointNotHTTP", func(c *Config) { c.OTLPEndpoint = "grpc://collector:4317" }},
		{"OTLPEndpointNoHost", func(c *Config) { c.OTLPEndpoint = "http://" }},
		{"OTelSampleRatioAboveOne", func(c *Config) { c.OTelSampleRatio = 1.5 }},
		{"ZeroMaxMessageSize", func(c *Config) { c.MaxMessageSize = 0 }},
		{"SegmentNotAboveMessage", func(c *Config) { c.SegmentSize = c.MaxMessageSize }},
		{"RequestBelowMessage", func(c *Config) { c.MaxRequestSize = c.MaxMessageSize - 1 }},
		{"TinyHeaderLimit", func(c *Config) { c.MaxHeaderBytes = 100 }},
		{"NoWaiters", func(c *Config) { c.MaxWaiters = 0 }},
		{"NoDelayLevels", func(c *Config) { c.DelayLevels = nil }},
		{"NegativeDelayLevel", func(c *Config) { c.DelayLevels = DelayLevels{time.Second, -time.Second} }},
		{"NoReadHeaderTimeout", func(c *Config) { c.ReadHeaderTimeout = 0 }},
		{"ReadTimeoutBelowHeaderTimeout", func(c *Config) { c.ReadTimeout = time.Second; c.ReadHeaderTimeout = 2 * time.Second }},
		{"NegativeShutdownDelay", func(c *Config) { c.ShutdownDelay = -1 }},
		{"BadLogFormat", func(c *Config) { c.LogFormat = "xml" }},
		{"BadLogLevel", func(c *Config) { c.LogLevel = "loud" }},
		{"BadDatabaseURL", func(c *Config) { c.DatabaseURL = "not a url" }},
		{"BadSQSListen", func(c *Config) { c.SQSListen = "9324" }},
		{"PublicSQSListenWithoutAuth", func(c *Config) { c.SQSListen = "0.0.0.0:9324" }},
		{"AdvertiseAddrWithoutPort", func(c *Config) { c.AdvertiseAddr = "10.0.0.1" }},
		{"AdvertiseAddrPortZero", func(c *Config) { c.AdvertiseAddr = "10.0.0.1:0" }},
		{"NoMetricsLabelValues", func(c *Config) { c.MetricsMaxLabelValues = 0 }},
		{"SendCeilingAboveOne", func(c *Config) { c.DiskSendCeiling = 1.5 }},
		{"SystemBelowSendCeiling", func(c *Config) { c.DiskSendCeiling, c.DiskSystemCeiling = 0.9, 0.8 }},
		{"NegativeCleanRatio", func(c *Config) { c.DiskMaxUsedRatio = -0.1 }},
		{"RetentionBelowAnHour", func(c *Config) { c.Retention = time.Minute }},
		{"NoDiskCheckInterval", func(c *Config) { c.DiskCheckInterval = 0 }},
		{"NegativeScrubRate", func(c *Config) { c.ScrubRate = -1 }},
		{"AllInterfacesWithoutAuth", func(c *Config) { c.Listen = ":8080" }},
		{"PublicAddressWithoutAuth", func(c *Config) { c.Listen = "192.0.2.10:8080" }},
		{"HostNameWithoutAuth", func(c *Config) { c.Listen = "gateway.example:8080" }},
		{"BadAdminListen", func(c *Config) { c.AdminListen = "9090" }},
		{"JWTWithoutACL", func(c *Config) { c.JWTSecret = "0123456789abcdef0123456789abcdef" }},
		{"ShortJWTSecret", func(c *Config) { c.ACLFile = "acl.yml"; c.JWTSecret = "short" }},
		{"JWTSecretAndJWKS", func(c *Config) {
			c.ACLFile, c.JWTSecret, c.JWTJWKSURL = "acl.yml", "0123456789abcdef0123456789abcdef", "https://idp.example/jwks"
			c.JWTIssuer, c.JWTAudience = "i", "a"
		}},
		{"JWKSWithoutAudience", func(c *Config) { c.ACLFile, c.JWTJWKSURL, c.JWTIssuer = "acl.yml", "https://idp.example/jwks", "i" }},
		{"JWKSOverPlainHTTP", func(c *Config) {
			c.ACLFile, c.JWTJWKSURL, c.JWTIssuer, c.JWTAudience = "acl.yml", "http://idp.example/jwks", "i", "a"
		}},
		{"NoAuthFailures", func(c *Config) { c.AuthFailuresPerMinute = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			tc.change(&cfg)
			require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)
		})
	}

	t.Run("NonLoopbackListen", func(t *testing.T) {
		t.Parallel()
		cfg := DefaultConfig()
		cfg.Listen = "0.0.0.0:8080"
		err := cfg.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, "--acl-file")
		require.ErrorContains(t, err, "--insecure-no-auth")
		for _, ok := range []func(*Config){
			func(c *Config) { c.InsecureNoAuth = true },
			func(c *Config) { c.ACLFile = "acl.yml" },
			func(c *Config) { c.Listen = "[::1]:8080" },
			func(c *Config) { c.Listen = "localhost:8080" },
			func(c *Config) { c.Listen = "127.0.0.2:0" },
		} {
			cfg := DefaultConfig()
			cfg.Listen = "0.0.0.0:8080"
			ok(&cfg)
			require.NoError(t, cfg.Validate())
		}
	})

	t.Run("ReportsEveryProblem", func(t *testing.T) {
		t.Parallel()
		cfg := DefaultConfig()
		cfg.Flush, cfg.LogLevel = "x", "y"
		err := cfg.Validate()
		require.ErrorContains(t, err, "flush")
		require.ErrorContains(t, err, "log-level")
	})
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want ByteSize
		out  string
	}{
		{"1GiB", 1 << 30, "1GiB"},
		{"4MiB", 4 << 20, "4MiB"},
		{"512KiB", 512 << 10, "512KiB"},
		{"1536KiB", 1536 << 10, "1536KiB"},
		{"64K", 64 << 10, "64KiB"},
		{"2G", 2 << 30, "2GiB"},
		{"1GB", 1_000_000_000, "1000000000B"},
		{"1048576", 1 << 20, "1MiB"},
		{" 80B ", 80, "80B"},
		{"0", 0, "0B"},
	} {
		var got ByteSize
		require.NoError(t, got.UnmarshalText([]byte(tc.in)), tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.Equal(t, tc.out, got.String(), tc.in)
	}
	for _, bad := range []string{"", "GiB", "-1MiB", "1.5GiB", "1PiB", "99999999999TiB", "ten"} {
		var got ByteSize
		require.Error(t, got.UnmarshalText([]byte(bad)), bad)
	}
}

func TestDelayLevels(t *testing.T) {
	t.Parallel()
	var levels DelayLevels
	require.NoError(t, levels.UnmarshalText([]byte("100ms, 1s\t90s 2h")))
	require.Equal(t, DelayLevels{100 * time.Millisecond, time.Second, 90 * time.Second, 2 * time.Hour}, levels)
	require.Equal(t, "100ms 1s 90s 2h", levels.String())
	require.Error(t, levels.UnmarshalText([]byte("1s 5x")))
}

func TestRedactedDatabaseURL(t *testing.T) {
	t.Parallel()
	cfg := Config{DatabaseURL: "postgres://mq:hunter2@db:5432/mq?sslmode=disable"}
	require.NotContains(t, cfg.redactedDatabaseURL(), "hunter2")
	require.Contains(t, cfg.redactedDatabaseURL(), "db:5432")
}
