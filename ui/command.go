package ui

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// command is one command of the : line. A screen declares the commands
// that open it in its kind (screenKinds); help, completion and the
// unknown-command error are made from them.
type command struct {
	// names are the command's name and its aliases.
	names []string
	// usage and help are its line in help; try names it in the
	// unknown-command error, suggest is what completion offers.
	usage, help, try, suggest string
	// parse reads the command's arguments into what it asks for: a
	// navMsg, a noteMsg or tea.QuitMsg.
	parse func(rest string) (tea.Msg, error)
}

// quitCommand leaves the console; it is the root's, not a screen's.
var quitCommand = command{names: []string{"quit", "q", "exit"}, usage: ":quit", help: "leave the console",
	try: "quit", suggest: "quit", parse: noArgs("quit", tea.QuitMsg{})}

// noArgs is the parse of a command that takes no arguments: it leads to
// msg, and refuses arguments rather than ignoring them.
func noArgs(name string, msg tea.Msg) func(rest string) (tea.Msg, error) {
	return func(rest string) (tea.Msg, error) {
		if strings.TrimSpace(rest) != "" {
			return nil, fmt.Errorf(":%s takes no arguments, not %q: write :%s", name, termtext.Clean(truncate(strings.TrimSpace(rest), 40)), name)
		}
		return msg, nil
	}
}

// commands lists every command of the : line, in the order help shows
// them.
func commands() []command {
	var out []command
	for _, k := range screenKinds {
		out = append(out, k.commands...)
	}
	return append(out, quitCommand)
}

// described is a navigation message that a command leads to: it says
// where, for CheckCommand.
type described interface{ describe() string }

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
	var suggest []string
	for _, c := range commands() {
		suggest = append(suggest, c.suggest)
	}
	in.SetSuggestions(suggest)
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
		line += "  " + c.st.Error.Render("✗ "+termtext.Clean(c.err.Error()))
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
	case described:
		return out.describe(), nil
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
	var try []string
	for _, c := range commands() {
		if slices.Contains(c.names, strings.ToLower(name)) {
			return c.parse(rest)
		}
		try = append(try, c.try)
	}
	return nil, fmt.Errorf("unknown command %q: try %s", name, strings.Join(try, ", "))
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
