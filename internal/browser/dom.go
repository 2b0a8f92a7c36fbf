package browser

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/errcode"
)

// injectJS is the page-understanding script: the snapshot walk, roles,
// accessible names and the locators. See the comment at its top.
//
//go:embed inject.js
var injectJS string

// worldName names Berth's isolated world in every frame. Chromium keeps one
// world per name and frame, and gives each new document a fresh context of
// it, so page scripts never share globals or prototypes with Berth's.
//
// A caveat for code sharing the tab: chromedp's selector queries and Poll
// remember the latest execution context created in a frame, whichever its
// world, so once Berth's world exists they may run in it. Evaluate and
// raw CDP calls without a context ID are not affected (they use the page's
// main world).
const worldName = "berth"

// Snapshot bounds: the defaults, and the most a caller may ask for.
const (
	defaultSnapshotDepth    = 64
	defaultSnapshotElements = 5000
	defaultSnapshotBytes    = 512 << 10
	maxSnapshotDepth        = 256
	maxSnapshotElements     = 100_000
	maxSnapshotBytes        = 8 << 20
	minSnapshotBytes        = 256 // room for a line or two and "- truncated"
)

// Target bounds.
const (
	maxTargetString = 4096 // selector, value, role, name, each frame selector
	maxFrameChain   = 8
)

// locateGroupSpan is how many Locate calls share one object group. The
// group before the previous one is released when a new one starts, so a
// Located's ObjectID stays valid for at least this many later Locates (or
// until the document changes), and a long wait loop does not pin elements.
const locateGroupSpan = 256

// refPattern is the shape of a snapshot ref: e12, or f1e3 inside frame 1.
var refPattern = regexp.MustCompile(`^(?:f[0-9]+)?e[0-9]+$`)

// Target selects one element: a CSS selector, or a semantic query.
//
// CSS selectors match through open shadow roots (within one tree each: a
// combinator does not cross a shadow boundary). Role, text and label
// queries see what the accessibility tree holds: elements hidden by
// display:none, visibility:hidden or aria-hidden do not match them. Text
// matches the innermost element whose rendered text contains Value (an
// element inside a button or link with the same text stands for it); label
// matches fields by their label elements, aria-label or aria-labelledby.
// Matching is by case-insensitive substring, or exact (case-sensitive, whole
// text, whitespace normalized) when Exact is set.
type Target struct {
	Selector string   `json:"selector,omitempty"` // CSS
	By       string   `json:"by,omitempty"`       // role | text | label | test_id (or testId) | ref
	Value    string   `json:"value,omitempty"`    // text, label, test id or ref
	Role     string   `json:"role,omitempty"`     // by=role: the ARIA role
	Name     string   `json:"name,omitempty"`     // by=role: accessible name (substring, case-insensitive unless Exact)
	Exact    bool     `json:"exact,omitempty"`
	Nth      *int     `json:"nth,omitempty"`   // pick the nth (0-based) of several matches
	Frame    []string `json:"frame,omitempty"` // iframe CSS selectors, outermost first, to search inside
}

// Valid reports the target's problems by field (JSON names), or nil when
// it is well formed. Whether a selector parses is known only in the page:
// Locate and Count report that as target_invalid.
func (t Target) Valid() map[string]string {
	p := map[string]string{}
	switch {
	case t.Selector != "" && t.By != "":
		p["selector"] = "give a selector or by, not both"
	case t.Selector == "" && t.By == "":
		p["by"] = "give a selector, or by: role, text, label, test_id or ref"
	}
	semantic := func(field, v string) {
		if v != "" {
			p[field] = field + " is only for by=role"
		}
	}
	switch t.By {
	case "":
		if t.Value != "" {
			p["value"] = "value needs by"
		}
		semantic("role", t.Role)
		semantic("name", t.Name)
	case "role":
		switch {
		case strings.TrimSpace(t.Role) == "" && strings.TrimSpace(t.Value) == "":
			p["role"] = "by=role needs a role, such as button or link"
		case t.Role != "" && t.Value != "" && !strings.EqualFold(t.Role, t.Value):
			p["value"] = "by=role takes role (and name), not value"
		}
	case "text", "label", "test_id", "testId":
		if strings.TrimSpace(t.Value) == "" {
			p["value"] = "by=" + t.By + " needs a value"
		}
		semantic("role", t.Role)
		semantic("name", t.Name)
	case "ref":
		if !refPattern.MatchString(t.Value) {
			p["value"] = "a ref from the latest snapshot, such as e12 or f1e3"
		}
		if len(t.Frame) > 0 {
			p["frame"] = "a ref names its frame already"
		}
		if t.Nth != nil {
			p["nth"] = "a ref names one element already"
		}
		semantic("role", t.Role)
		semantic("name", t.Name)
	default:
		p["by"] = "must be role, text, label, test_id or ref"
	}
	if t.Nth != nil && *t.Nth < 0 {
		p["nth"] = "must be 0 or more"
	}
	if len(t.Frame) > maxFrameChain {
		p["frame"] = fmt.Sprintf("at most %d nested iframes", maxFrameChain)
	}
	for i, f := range t.Frame {
		switch {
		case strings.TrimSpace(f) == "":
			p["frame"] = fmt.Sprintf("frame[%d] is empty", i)
		case len(f) > maxTargetString:
			p["frame"] = fmt.Sprintf("frame[%d] is longer than %d bytes", i, maxTargetString)
		}
	}
	for field, v := range map[string]string{"selector": t.Selector, "value": t.Value, "role": t.Role, "name": t.Name} {
		if len(v) > maxTargetString {
			p[field] = fmt.Sprintf("at most %d bytes", maxTargetString)
		}
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// describe names the target in messages: `role button named "Save" in
// iframe "#pay"`.
func (t Target) describe() string {
	var s string
	switch t.By {
	case "":
		s = fmt.Sprintf("selector %q", t.Selector)
	case "role":
		role := t.Role
		if role == "" {
			role = t.Value
		}
		s = "role " + role
		if t.Name != "" {
			s += fmt.Sprintf(" named %q", t.Name)
		}
	case "test_id", "testId":
		s = fmt.Sprintf("test id %q", t.Value)
	case "ref":
		s = "ref " + t.Value
	default:
		s = fmt.Sprintf("%s %q", t.By, t.Value)
	}
	if t.Exact && t.By != "ref" && t.By != "" {
		s += " (exact)"
	}
	if len(t.Frame) > 0 {
		q := make([]string, len(t.Frame))
		for i, f := range t.Frame {
			q[i] = fmt.Sprintf("%q", f)
		}
		s += " in iframe " + strings.Join(q, " > ")
	}
	return s
}

// SnapshotOptions bounds a snapshot. Zero (or negative) values take the
// defaults: depth 64 (levels of the YAML), 5000 elements (nodes of the
// YAML, text and /url lines not counted), 512 KiB (of the YAML, the final
// "- truncated" line included). Larger values are capped at 256, 100,000
// and 8 MiB; MaxBytes is at least 256.
type SnapshotOptions struct{ MaxDepth, MaxElements, MaxBytes int }

func (o SnapshotOptions) withDefaults() SnapshotOptions {
	bound := func(v, def, most int) int {
		switch {
		case v <= 0:
			return def
		case v > most:
			return most
		}
		return v
	}
	return SnapshotOptions{
		MaxDepth:    bound(o.MaxDepth, defaultSnapshotDepth, maxSnapshotDepth),
		MaxElements: bound(o.MaxElements, defaultSnapshotElements, maxSnapshotElements),
		MaxBytes:    max(bound(o.MaxBytes, defaultSnapshotBytes, maxSnapshotBytes), minSnapshotBytes),
	}
}

// Snapshot is a page as an agent reads it: accessibility-style YAML, one
// node a line, nested by indentation:
//
//   - heading "Sign in" [level=1]
//   - textbox "Email" [required] [ref=e1]: alice@example.com
//   - checkbox "Remember me" [checked] [ref=e2]
//   - button "Continue" [ref=e3]
//   - link "Docs" [ref=e4]:
//   - /url: https://example.com/docs
//   - text: Hello
//   - iframe "Payment":
//   - textbox "Card number" [ref=f1e5]
//
// Refs (e12, f1e5 inside frame 1) name the visible elements an agent can
// act on: links, buttons, form fields (disabled ones too: they are often
// enabled later), elements with an interactive role, a tabindex, an onclick
// attribute or a pointer cursor of their own, and contenteditable hosts. A
// ref stays the same across snapshots while its element keeps its role and
// name, and is never reused for another element in the tab. Hidden content
// is left out; wrappers without a role are flattened into their parent.
// When a bound cut the walk short the YAML ends with "- truncated".
//
// Same-origin iframes are walked as children of their iframe node. A
// cross-origin iframe runs in another renderer process, out of reach of
// the world the walk runs in: it shows as `- iframe "title" [cross-origin]`
// with no content. Open shadow roots are walked as children of their host;
// closed ones are out of reach.
//
// Password values never appear; other fields show their value after the
// colon.
type Snapshot struct {
	URL       string `json:"url"`
	Title     string `json:"title"`
	YAML      string `json:"yaml"`
	Refs      int    `json:"refs"` // how many refs the YAML holds
	Truncated bool   `json:"truncated"`
}

// Located is a target's element, scrolled into view.
type Located struct {
	// ObjectID is the element in Berth's isolated world of the tab's top
	// document (elements of same-origin iframes included). Call functions on
	// it with Runtime.callFunctionOn; it stays valid for the next 256
	// Locate calls of the DOM, or until the document changes.
	ObjectID runtime.RemoteObjectID
	// X and Y are the element's center in top-level viewport CSS pixels
	// (iframe offsets added), after scrolling it into view.
	X, Y float64
	// Visible: the element has a box, is not hidden by visibility, and
	// neither are the iframes holding it. Enabled: not disabled (by the
	// attribute, a disabled fieldset or aria-disabled). Editable: enabled
	// and takes text (a text-like input or textarea that is not read-only,
	// or contenteditable).
	Visible, Enabled, Editable bool
	// Tag is the lowercase tag name, Type the input (or button) type, Role
	// the ARIA role ("" when none) and Name the accessible name.
	Tag, Type, Role, Name string
}

// DOM is one tab's page-understanding state: Berth's isolated world (page scripts
// cannot see or tamper with it), the refs of the latest snapshot.
//
// The world is bound to the main frame's document: every call checks the
// document (the frame's loader) first, and on a new one binds the new
// document's context and installs the script again, so refs of an earlier
// document are stale. A DOM is safe for concurrent use; calls on one DOM
// run one at a time.
type DOM struct {
	// mu serializes calls (they share the world and the refs) and guards
	// the fields below.
	mu sync.Mutex
	// frameID and loaderID identify the document the world belongs to.
	frameID  cdp.FrameID
	loaderID cdp.LoaderID
	// world is the context of Berth's world in that document; 0 when none
	// is bound (new DOM, after Reset, or after the context went away).
	world runtime.ExecutionContextID
	// seq is the highest ref number issued in the tab. A new document's
	// script continues after it, so refs never repeat and an old one is
	// recognized as stale rather than found on another element.
	seq int64
	// locates counts Locate calls, to rotate object groups.
	locates int
	// unsure is set until a bind, and again by Invalidate when the tab's
	// main document may have changed: only then does a call read the
	// frame tree first. (A change it misses still shows as a vanished
	// context, which the call handles.)
	unsure atomic.Bool
}

// NewDOM returns the page-understanding state of a new tab.
func NewDOM() *DOM {
	d := &DOM{}
	d.unsure.Store(true)
	return d
}

// Invalidate says the main document may have changed (a navigation event):
// the next call checks the frame tree before it trusts its world.
func (d *DOM) Invalidate() { d.unsure.Store(true) }

// Reset forgets refs and the world (call after navigation; DOM also notices a new
// document itself). Refs issued before are stale afterwards.
func (d *DOM) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.world, d.frameID, d.loaderID = 0, "", ""
	d.unsure.Store(true)
}

// Snapshot takes a snapshot of the tab in ctx (a chromedp tab context). Refs
// resolve only against the latest snapshot.
func (d *DOM) Snapshot(ctx context.Context, opts SnapshotOptions) (Snapshot, error) {
	o := opts.withDefaults()
	d.mu.Lock()
	defer d.mu.Unlock()
	var res struct {
		YAML      string `json:"yaml"`
		Refs      int    `json:"refs"`
		Truncated bool   `json:"truncated"`
		URL       string `json:"url"`
		Title     string `json:"title"`
		Seq       int64  `json:"seq"`
	}
	arg := map[string]int{"maxDepth": o.MaxDepth, "maxElements": o.MaxElements, "maxBytes": o.MaxBytes}
	if err := d.callValue(ctx, "snapshot", arg, &res); err != nil {
		return Snapshot{}, fmt.Errorf("taking a snapshot: %w", err)
	}
	d.seq = max(d.seq, res.Seq)
	return Snapshot{URL: res.URL, Title: res.Title, YAML: res.YAML, Refs: res.Refs, Truncated: res.Truncated}, nil
}

// Locate finds exactly one element for t (waiting is the caller's job: it returns at once).
//
// Errors: target_invalid (Invalid) for a malformed target or selector;
// target_not_found and frame_not_found (NotFound); target_ambiguous
// (Conflict) when several elements match and t has no Nth; ref_stale
// (Conflict) for a ref not in the latest snapshot of this document;
// frame_cross_origin (Unimplemented) for an iframe showing another origin.
func (d *DOM) Locate(ctx context.Context, t Target) (Located, error) {
	return d.locate(ctx, t, false)
}

// Point is Locate without the element's reference (ObjectID is empty):
// one round trip less, for ops that only need where the element is.
func (d *DOM) Point(ctx context.Context, t Target) (Located, error) {
	return d.locate(ctx, t, true)
}

func (d *DOM) locate(ctx context.Context, t Target, pointOnly bool) (Located, error) {
	if p := t.Valid(); p != nil {
		return Located{}, invalidTarget(p)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var res struct {
		scriptResult
		X        float64 `json:"x"`
		Y        float64 `json:"y"`
		Visible  bool    `json:"visible"`
		Enabled  bool    `json:"enabled"`
		Editable bool    `json:"editable"`
		Tag      string  `json:"tag"`
		Type     string  `json:"type"`
		Role     string  `json:"role"`
		Name     string  `json:"name"`
	}
	if err := d.callValue(ctx, "locate", t, &res); err != nil {
		return Located{}, fmt.Errorf("locating %s: %w", t.describe(), err)
	}
	if res.Error != nil {
		return Located{}, res.Error.err(t)
	}
	loc := Located{
		X: res.X, Y: res.Y,
		Visible: res.Visible, Enabled: res.Enabled, Editable: res.Editable,
		Tag: res.Tag, Type: res.Type, Role: res.Role, Name: res.Name,
	}
	if pointOnly {
		return loc, nil // a pointer op needs the place, not the element
	}
	// The script kept the element; fetch it by reference, in the same
	// world (no document check: a new document would have no element).
	obj, err := d.call(ctx, false, "take", nil, false, d.objectGroup(ctx))
	if err != nil {
		return Located{}, fmt.Errorf("locating %s: %w", t.describe(), err)
	}
	if obj == nil || obj.ObjectID == "" {
		return Located{}, errcode.TargetNotFound.New("the page changed while locating %s; try again", t.describe())
	}
	loc.ObjectID = obj.ObjectID
	return loc, nil
}

// Count returns how many elements match t (for waits on count / state).
// With Nth it is 1 when the nth match exists, else 0; a ref counts 1 while
// it resolves (a stale one is an error). Errors are Locate's, less
// target_not_found and target_ambiguous.
func (d *DOM) Count(ctx context.Context, t Target) (int, error) {
	if p := t.Valid(); p != nil {
		return 0, invalidTarget(p)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var res struct {
		scriptResult
		Count int `json:"count"`
	}
	if err := d.callValue(ctx, "count", t, &res); err != nil {
		return 0, fmt.Errorf("counting %s: %w", t.describe(), err)
	}
	if res.Error != nil {
		return 0, res.Error.err(t)
	}
	return res.Count, nil
}

// scriptResult is the error part of a script answer.
type scriptResult struct {
	Error *scriptError `json:"error"`
}

// scriptError is a failure the script reports about a target.
type scriptError struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
	Nth    bool   `json:"nth"` // target_not_found: the nth match does not exist
}

// err turns a script's failure into an errcode error that names the target.
func (e *scriptError) err(t Target) error {
	what := t.describe()
	switch e.Reason {
	case "target_not_found":
		if e.Nth {
			return errcode.TargetNotFound.New("nth %d asked for, but %d elements match %s", *t.Nth, e.Count, what)
		}
		return errcode.TargetNotFound.New("no element matches %s", what)
	case "target_ambiguous":
		if frame, ok := strings.CutPrefix(e.Detail, "frame "); ok {
			return errcode.TargetAmbiguous.New("%d iframes match frame selector %q (looking for %s); narrow the frame selector", e.Count, frame, what)
		}
		return errcode.TargetAmbiguous.New("%d elements match %s; give nth or narrow the target", e.Count, what)
	case "ref_stale":
		return errcode.RefStale.New("ref %s is from an older snapshot or a previous document; take a new snapshot", t.Value)
	case "target_invalid":
		field := e.Field
		if field == "" {
			field = "target"
		}
		err := invalidTarget(map[string]string{field: e.Detail})
		err.Message = fmt.Sprintf("%s is invalid: %s", what, e.Detail)
		return err
	case "frame_not_found":
		return errcode.FrameNotFound.New("no iframe matches frame selector %q (looking for %s)", e.Detail, what)
	case "frame_cross_origin":
		return errcode.FrameCrossOrigin.New("iframe %q shows another origin, which Berth cannot reach into (looking for %s)", e.Detail, what)
	}
	return errcode.New(errcode.Internal, "the page script failed on %s: %s %s", what, e.Reason, e.Detail)
}

func invalidTarget(problems map[string]string) *errcode.Error {
	return &errcode.Error{Code: errcode.TargetInvalid.Code(), Reason: errcode.TargetInvalid.String(), Message: "the target is invalid", Problems: problems}
}

// callValue calls the script's entry point op with arg and decodes its
// JSON answer into out.
func (d *DOM) callValue(ctx context.Context, op string, arg, out any) error {
	obj, err := d.call(ctx, true, op, arg, true, "")
	if err != nil {
		return err
	}
	if obj == nil || len(obj.Value) == 0 {
		return fmt.Errorf("the page script answered nothing to %s", op)
	}
	return json.Unmarshal(obj.Value, out)
}

// callFn calls an entry point of the script; it throws berth_missing when
// the context has no script (a context that is not the one installed).
const callFn = `function(op, arg) {
	const b = globalThis.__berth;
	if (!b) throw new Error('berth_missing');
	return b[op](arg);
}`

// call runs op in Berth's world, binding (and, if need be, installing) it
// first when check is set. byValue returns JSON, otherwise a reference in
// object group. A context that vanished (the document changed under the
// call) is bound anew and the call retried once.
func (d *DOM) call(ctx context.Context, check bool, op string, arg any, byValue bool, group string) (*runtime.RemoteObject, error) {
	argJSON, err := json.Marshal(arg)
	if err != nil {
		return nil, err
	}
	yes := true
	for attempt := 0; ; attempt++ {
		if (check && d.unsure.Load()) || d.world == 0 {
			if err := d.bind(ctx); err != nil {
				return nil, err
			}
		}
		params := runtime.CallFunctionOnParams{
			FunctionDeclaration: callFn,
			ExecutionContextID:  d.world,
			Arguments:           []*runtime.CallArgument{{Value: mustJSON(op)}, {Value: argJSON}},
			Silent:              &yes,
			ObjectGroup:         group,
		}
		if byValue {
			params.ReturnByValue = &yes
		}
		res, err := chromedp.Call(ctx, runtime.CallFunctionOn, params)
		gone := err != nil && contextGone(err)
		if err == nil && res.ExceptionDetails != nil {
			msg := exceptionMessage(res.ExceptionDetails)
			if !strings.Contains(msg, "berth_missing") {
				return nil, errcode.Wrap(errcode.Internal, errors.New(msg), "the page script failed")
			}
			gone = true
		}
		switch {
		case gone && attempt == 0 && check:
			d.world = 0
			continue
		case gone:
			d.world = 0
			return nil, nil // the document changed: nothing to answer from it
		case err != nil:
			return nil, err
		}
		return res.Result, nil
	}
}

// bind makes sure d.world is Berth's world in the main frame's current
// document, with the script installed.
func (d *DOM) bind(ctx context.Context) error {
	d.unsure.Store(false) // before the read: an event during it sets it again
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return fmt.Errorf("reading the frame tree: %w", err)
	}
	if tree.FrameTree == nil || tree.FrameTree.Frame == nil {
		return errors.New("the page has no main frame")
	}
	f := tree.FrameTree.Frame
	if d.world != 0 && f.ID == d.frameID && f.LoaderID == d.loaderID {
		return nil
	}
	w, err := chromedp.Call(ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: f.ID, WorldName: worldName})
	if err != nil {
		return fmt.Errorf("creating the isolated world: %w", err)
	}
	// Install (a no-op when this document's world has the script already)
	// and start from the tab's ref counter, forgetting the refs this
	// world may remember: they belong to a snapshot before the latest (a
	// document restored from the back-forward cache keeps its world).
	begin, _ := json.Marshal(map[string]any{"base": d.seq, "forget": true})
	yes := true
	res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{
		Expression:    injectJS + ";\nglobalThis.__berth.begin(" + string(begin) + ")",
		ContextID:     w.ExecutionContextID,
		ReturnByValue: &yes,
		Silent:        &yes,
	})
	if err != nil {
		return fmt.Errorf("installing the page script: %w", err)
	}
	if res.ExceptionDetails != nil {
		return errcode.Wrap(errcode.Internal, errors.New(exceptionMessage(res.ExceptionDetails)), "installing the page script failed")
	}
	d.frameID, d.loaderID, d.world = f.ID, f.LoaderID, w.ExecutionContextID
	return nil
}

// objectGroup returns the object group of the next Locate, releasing the
// one before the previous when a new group starts.
func (d *DOM) objectGroup(ctx context.Context) string {
	n := d.locates
	d.locates++
	g := n / locateGroupSpan
	name := fmt.Sprintf("berth-locate-%d", g%2)
	if n%locateGroupSpan == 0 && g >= 2 {
		// Best effort: a failure leaves objects to die with the document.
		_, _ = chromedp.Call(ctx, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: name})
	}
	return name
}

// contextGone reports a CDP error saying the execution context no longer
// exists: its document was replaced.
func contextGone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find context with specified id") ||
		strings.Contains(s, "Execution context was destroyed") ||
		strings.Contains(s, "Cannot find default execution context")
}

func exceptionMessage(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return d.Text
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
