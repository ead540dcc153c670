package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/leasekeeper/leasekeeper/auth"
)

// keyCreator is the part of the store that bootstrap needs.
type keyCreator interface {
	CreateKey(ctx context.Context, k auth.Key, hash []byte, onlyIfNone bool) (bool, error)
}

// bootstrapAdmin makes sure a database has a key to start with. On a database with no key at
// all, the admin key is adminKey (LEASEKEEPER_ADMIN_KEY) if set, else a new one written to
// keyFile (mode 0600): the log names the file, never the key.
func bootstrapAdmin(ctx context.Context, st keyCreator, adminKey, keyFile string, log *slog.Logger) error {
	secret, fromEnv := adminKey, adminKey != ""
	if fromEnv {
		if err := auth.ValidateSecret(secret); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("LEASEKEEPER_ADMIN_KEY: %w", err)}
		}
	} else {
		secret = auth.NewSecret()
	}
	k := auth.Key{ID: auth.NewKeyID(), Label: "admin (bootstrap)", Role: auth.Admin}
	created, err := st.CreateKey(ctx, k, auth.Hash(secret), true)
	if err != nil {
		return fmt.Errorf("create the first admin key: %w", err)
	}
	switch {
	case !created:
		return nil
	case fromEnv:
		log.Info("first admin key taken from LEASEKEEPER_ADMIN_KEY", "key_id", k.ID)
		return nil
	}
	if err := writeSecretFile(keyFile, []byte(secret+"\n")); err != nil {
		return fmt.Errorf("write the first admin key: %w", err)
	}
	log.Warn("a new admin key was written to a file beside the database: use it, create keys of your own, and delete the file",
		"file", keyFile, "key_id", k.ID)
	return nil
}

// serverSecret reads the server's secret from path, creating it (0600) on first use.
func serverSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(s) < 32 {
			return nil, fmt.Errorf("server secret %s: want at least 64 hex digits", path)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read server secret: %w", err)
	}
	s := make([]byte, 32)
	rand.Read(s)
	if err := writeSecretFile(path, []byte(hex.EncodeToString(s)+"\n")); err != nil {
		return nil, fmt.Errorf("create server secret: %w", err)
	}
	return s, nil
}

// writeSecretFile writes b to path readable by the owner only, replacing any old file.
func writeSecretFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".lk-secret-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// loopback reports whether a listen address serves only this machine.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
