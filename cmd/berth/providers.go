package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/berthdev/berth/internal/browser"
)

// providerFlags are the remote browser providers' settings of berth
// serve. Credentials come from files only: never a flag's value (a
// process list shows it) and never a request.
type providerFlags struct {
	browserbaseKeyFile, browserbaseProject, browserbaseURL string
	steelKeyFile, steelURL                                 string
}

func (p *providerFlags) register(f *pflag.FlagSet) {
	f.StringVar(&p.browserbaseKeyFile, "browserbase-api-key-file", "", "file holding the Browserbase API key: remote browser sessions may then name provider browserbase")
	f.StringVar(&p.browserbaseProject, "browserbase-project-id", "", "Browserbase project of the sessions (with --browserbase-api-key-file)")
	f.StringVar(&p.browserbaseURL, "browserbase-url", browser.DefaultBrowserbaseURL, "Browserbase API base URL")
	f.StringVar(&p.steelKeyFile, "steel-api-key-file", "", "file holding the Steel API key: remote browser sessions may then name provider steel")
	f.StringVar(&p.steelURL, "steel-url", browser.DefaultSteelURL, "Steel API base URL")
}

// build returns the configured providers, by name.
func (p *providerFlags) build() (map[string]browser.Provider, error) {
	out := map[string]browser.Provider{}
	switch {
	case p.browserbaseKeyFile != "":
		key, err := readKeyFile("--browserbase-api-key-file", p.browserbaseKeyFile)
		if err != nil {
			return nil, err
		}
		if p.browserbaseProject == "" {
			return nil, fmt.Errorf("--browserbase-api-key-file needs --browserbase-project-id")
		}
		bb, err := browser.NewBrowserbase(browser.BrowserbaseConfig{APIKey: key, ProjectID: p.browserbaseProject, BaseURL: p.browserbaseURL})
		if err != nil {
			return nil, fmt.Errorf("--browserbase-url: %w", err)
		}
		out[bb.Name()] = bb
	case p.browserbaseProject != "":
		return nil, fmt.Errorf("--browserbase-project-id needs --browserbase-api-key-file")
	}
	if p.steelKeyFile != "" {
		key, err := readKeyFile("--steel-api-key-file", p.steelKeyFile)
		if err != nil {
			return nil, err
		}
		st, err := browser.NewSteel(browser.SteelConfig{APIKey: key, BaseURL: p.steelURL})
		if err != nil {
			return nil, fmt.Errorf("--steel-url: %w", err)
		}
		out[st.Name()] = st
	}
	return out, nil
}

// readKeyFile reads an API key: one line of at most 4 KiB, surrounding
// white space ignored. The key never appears in an error.
func readKeyFile(flag, path string) (browser.Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4097))
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case len(b) > 4096:
		return "", fmt.Errorf("%s: %s is larger than 4 KiB, not an API key", flag, path)
	case key == "":
		return "", fmt.Errorf("%s: %s is empty", flag, path)
	case strings.ContainsAny(key, " \t\r\n"):
		return "", fmt.Errorf("%s: %s holds more than one line or word; it must hold the API key only", flag, path)
	}
	return browser.Secret(key), nil
}
