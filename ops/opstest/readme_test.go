package opstest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEGoSnippetsAreCode holds every Go snippet of the README to the
// code it comes from: each is preceded, since the previous snippet or
// heading, by a link to a Go file (an Example or a test that make test
// runs), and its lines are a run of that file's lines, indentation aside.
// And internal/outside's service is made of those snippets alone: every
// line of ticketsvc.go after its imports is in one.
func TestREADMEGoSnippetsAreCode(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)

	link := regexp.MustCompile(`\]\(([^)\s]+\.go)\)`)
	covered := map[string][]bool{} // file: which of its lines a snippet shows
	lines := strings.Split(string(readme), "\n")
	source := "" // the latest Go file linked since the latest snippet or heading
	snippets := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "#"):
			source = ""
		case strings.HasPrefix(line, "```go"):
			start := i + 1
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			}
			snippets++
			snippet := lines[start:i]
			require.NotEmpty(t, source, "README.md:%d: a Go snippet with no link to the Go file it comes from before it", start)
			file := readLines(t, filepath.Join(root, source))
			if covered[source] == nil {
				covered[source] = make([]bool, len(file))
			}
			at := findRun(file, snippet)
			require.GreaterOrEqual(t, at, 0, "README.md:%d: the snippet is not a run of the lines of %s:\n%s",
				start, source, strings.Join(snippet, "\n"))
			for j := range snippet {
				covered[source][at+j] = true
			}
			source = ""
		default:
			if m := link.FindAllStringSubmatch(line, -1); m != nil {
				source = m[len(m)-1][1]
			}
		}
	}
	require.Positive(t, snippets)

	const service = "internal/outside/ticketsvc.go"
	file := readLines(t, filepath.Join(root, service))
	afterImports := false
	for n, line := range file {
		if !afterImports {
			afterImports = line == ")" // the end of the import block
			continue
		}
		if strings.TrimSpace(line) != "" {
			require.True(t, n < len(covered[service]) && covered[service][n],
				"%s:%d is in no README snippet: %s", service, n+1, line)
		}
	}
	require.True(t, afterImports, "%s has an import block", service)
}

// readLines reads a file as lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(string(b), "\n")
}

// findRun is the index in file where snippet's lines start, one after
// another, comparing them without their indentation; -1 if they do not.
func findRun(file, snippet []string) int {
	trim := func(s string) string { return strings.TrimSpace(s) }
	for at := 0; at+len(snippet) <= len(file); at++ {
		match := true
		for j, line := range snippet {
			if trim(file[at+j]) != trim(line) {
				match = false
				break
			}
		}
		if match {
			return at
		}
	}
	return -1
}
