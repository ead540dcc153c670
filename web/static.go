package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

// staticFiles holds the static folder; embed.FS is read-only.
//
//go:embed static
var staticFiles embed.FS

// Static returns the dashboard's static files (app.css, app.js, favicon.svg) at the root of
// the file system, to be served under /static/, e.g. with
// http.StripPrefix("/static/", http.FileServerFS(web.Static())).
func Static() fs.FS {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		// fs.Sub fails only for an invalid path, and "static" is valid.
		panic(err)
	}
	return sub
}

// AssetVersion is a short hash of the static files, for [Site.AssetVersion]: it changes
// whenever one of them does, so browsers never run an old app.js against new pages. It reads
// every file, so call it once at start-up.
func AssetVersion() string {
	h := sha256.New()
	// WalkDir visits files in lexical order, so the hash does not depend on the machine.
	err := fs.WalkDir(staticFiles, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFiles.ReadFile(path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write([]byte{0})
		h.Write(b)
		return nil
	})
	if err != nil {
		// The embedded files can always be read.
		panic(err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
