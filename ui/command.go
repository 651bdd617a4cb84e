package ui

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/storeview"
)

// commandHelp lists the commands of the : line.
var commandHelp = [][2]string{
	{":ops [filter]", "operations, optionally filtered (:ops state:stuck tool:x)"},
	{":stuck [filter]", "stuck records, the longest expired lease first"},
	{":conflicts [filter]", "records with unreviewed conflicting attempts"},
	{":key TENANT/TOOL/KEY", "look up one identity"},
	{":audit [filter]", "the audit trail, newest first (:audit outcome:denied)"},
	{":retention", "the retention review of every tool"},
	{":overview", "the first screen"},
	{":quit", "leave the console"},
}

// cmdline is the ":" command line.
type cmdline struct {
	keys   KeyMap
	st     Styles
	input  textinput.Model
	active bool
	err    error
}

func newCmdline(keys KeyMap, st Styles) cmdline {
	in := textinput.New()
	in.Prompt = ":"
	in.CharLimit = commandLimit
	in.PromptStyle = st.Bold
	in.TextStyle = st.Input
	in.Cursor.Style = st.Selected
	in.Cursor.TextStyle = st.Input
	in.Cursor.SetMode(cursor.CursorStatic)
	in.ShowSuggestions = true
	in.SetSuggestions([]string{"ops ", "stuck", "conflicts", "key ", "audit", "retention", "overview", "quit"})
	in.CompletionStyle = st.Muted
	return cmdline{keys: keys, st: st, input: in}
}

func (c *cmdline) open() tea.Cmd {
	c.active = true
	c.err = nil
	c.input.SetValue("")
	return c.input.Focus()
}

func (c *cmdline) close() {
	c.active = false
	c.err = nil
	c.input.Blur()
}

// update handles a key; it returns what the command asks for (a navMsg,
// a noteMsg or tea.QuitMsg) once one is entered.
func (c *cmdline) update(msg tea.KeyMsg) (tea.Msg, tea.Cmd) {
	switch {
	case key.Matches(msg, c.keys.Cancel):
		c.close()
		return nil, nil
	case key.Matches(msg, c.keys.Accept):
		out, err := parseCommand(c.input.Value())
		if err != nil {
			c.err = err
			return nil, nil
		}
		c.close()
		return out, nil
	}
	var cmd tea.Cmd
	c.input, cmd = c.input.Update(msg)
	c.err = nil
	return nil, cmd
}

// View renders the line: what was typed, then the error if any, cut to
// the width.
func (c *cmdline) View(w int) string {
	line := " " + c.input.View()
	if c.err != nil {
		line += "  " + c.st.Error.Render("✗ "+Clean(c.err.Error()))
	}
	return truncate(line, w)
}

// noteMsg is a short message for the operator's message line.
type noteMsg string

// commandLimit is the longest command line, in characters: what the :
// line lets an operator type, and so what --goto accepts.
const commandLimit = 1000

// CheckCommand reads a : command (with or without the colon) as the
// command line does and says where it leads, for example
// "operations list: state:stuck tool:x". opsdesk --goto checks its
// command with it before the console starts, and the alert rules' tests
// check every command an alert points at. Its errors are the command
// line's own, and an empty command is one.
func CheckCommand(line string) (string, error) {
	out, err := parseCommand(line)
	if err != nil {
		return "", err
	}
	switch out := out.(type) {
	case tea.QuitMsg:
		return "quit", nil
	case navMsg:
		switch out.to {
		case screenList:
			return "operations list: " + out.filterText, nil
		case screenDetail:
			return "operation " + out.ident.Tenant + "/" + out.ident.Tool + "/" + out.ident.Key, nil
		case screenAudit:
			return "audit trail: " + out.filterText, nil
		case screenReview:
			return "retention review", nil
		case screenOverview:
			return "overview", nil
		}
	}
	return "", errors.New("no command: write one such as stuck tool:charge-card, conflicts, audit or retention")
}

// parseCommand reads a command line. A name and its arguments are
// separated by any white space, as filter terms are.
func parseCommand(line string) (tea.Msg, error) {
	if err := checkLine(line); err != nil {
		return nil, err
	}
	line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), ":"))
	if line == "" {
		return nil, nil
	}
	name, rest := line, ""
	if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
		name, rest = line[:i], strings.TrimSpace(line[i:])
	}
	filter := func() (storeview.Filter, error) { return storeview.ParseFilter(rest) }
	switch strings.ToLower(name) {
	case "ops", "op", "operations", "list", "ls":
		f, err := filter()
		if err != nil {
			return nil, err
		}
		sort := storeview.SortNewest
		if len(f.States) == 1 && (f.States[0] == storeview.StateStuck || f.States[0] == storeview.StatePending) {
			sort = storeview.SortLease
		}
		return listOf(f, sort), nil
	case "stuck":
		f, err := filter()
		if err != nil {
			return nil, err
		}
		f.States = []storeview.State{storeview.StateStuck}
		return listOf(f, storeview.SortLease), nil
	case "conflicts", "conflicted", "conflict":
		f, err := filter()
		if err != nil {
			return nil, err
		}
		f.Conflicted = true
		return listOf(f, storeview.SortNewest), nil
	case "key", "get":
		id, err := parseIdentity(rest)
		if err != nil {
			return nil, err
		}
		return navMsg{to: screenDetail, ident: &id}, nil
	case "overview", "home", "top":
		return navMsg{to: screenOverview}, nil
	case "q", "quit", "exit":
		return tea.QuitMsg{}, nil
	case "retention", "review":
		return navMsg{to: screenReview}, nil
	case "audit", "trail":
		f, err := storeview.ParseAuditFilter(rest)
		if err != nil {
			return nil, err
		}
		return auditOf(f), nil
	}
	return nil, fmt.Errorf("unknown command %q: try ops, stuck, conflicts, key TENANT/TOOL/KEY, audit, retention, overview, quit", name)
}

// checkLine refuses what the : line cannot hold: a command longer than
// it takes, text that is not UTF-8, and control characters other than
// white space (a pasted NUL or escape sequence). The errors do not repeat
// the text, which may be long or unprintable.
func checkLine(line string) error {
	if n := utf8.RuneCountInString(line); n > commandLimit {
		return fmt.Errorf("the command is %d characters long; a command is at most %d", n, commandLimit)
	}
	if !utf8.ValidString(line) {
		return errors.New("the command is not valid UTF-8")
	}
	for i, r := range line {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return fmt.Errorf("the command contains the control character %U at byte %d", r, i)
		}
	}
	return nil
}

// parseIdentity reads TENANT/TOOL/KEY; the key may itself contain
// slashes.
func parseIdentity(s string) (identity, error) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return identity{}, errors.New("write :key TENANT/TOOL/KEY, for example :key acme/create-ticket/run-42")
	}
	return identity{Tenant: parts[0], Tool: parts[1], Key: parts[2]}, nil
}
