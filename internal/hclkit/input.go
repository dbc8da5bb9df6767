package hclkit

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/gpuaas/imagectl/internal/readlimit"
)

// The limits on HCL input. Every byte a user gives imagectl that reaches an
// HCL parser (recipes, layer files, var files, -var and IMAGECTL_VAR_*
// values parsed as expressions, templates, sites.hcl) passes checkInput
// first: hclsyntax parses and evaluates by recursion, and 120 KB of nested
// brackets exhaust the stack, which kills the process with no diagnostic
// at all. Both limits are far above what a recipe needs (the
// shipped H200 recipe is 11 KB and nests 7 levels).
const (
	// MaxInputSize is the largest HCL input imagectl reads, in bytes: a
	// package list of 64,000 names fits.
	MaxInputSize = 1 << 20
	// MaxNesting is how deeply an HCL input may nest. Each bracket, brace,
	// parenthesis, quote, heredoc, template interpolation and template
	// if or for directive opens a level, and so does each operator within
	// one expression (a ? b : c, a + b, !a, a[*]): hclsyntax recurses on
	// each of them.
	MaxNesting = 256
	// PipeWait is how long a pipe given as an HCL file (a FIFO, or the
	// shell's -var-file <(command)) may go without input before it is
	// refused: one nobody writes never hangs imagectl.
	PipeWait = 5 * time.Second
)

// SummaryTooDeep is the summary of the diagnostic for input nested too
// deeply.
const SummaryTooDeep = "Nested too deeply"

// syntaxMode is what an input is: which lexer reads it.
type syntaxMode int

const (
	configSyntax     syntaxMode = iota // a file of attributes and blocks
	expressionSyntax                   // one expression (-var values)
	templateSyntax                     // a template file (templatefile, file templates)
)

// ReadInput reads an HCL input file, refusing one larger than MaxInputSize
// without reading all of it. A pipe is read too, until its writer closes
// it (process substitution: -var-file <(vault ...)), waiting at most
// PipeWait for input; devices, sockets and directories are refused.
func ReadInput(path string) ([]byte, error) {
	src, err := readlimit.FileOrPipe(path, MaxInputSize, PipeWait)
	if errors.Is(err, readlimit.ErrTooLarge) {
		return nil, &inputTooLargeError{path: path}
	}
	return src, err
}

type inputTooLargeError struct{ path string }

func (e *inputTooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes (1 MiB), the most imagectl reads of an HCL file", e.path, MaxInputSize)
}

// IsTooLarge reports whether err is ReadInput refusing a file for its size.
func IsTooLarge(err error) bool {
	var e *inputTooLargeError
	return errors.As(err, &e)
}

// ParseConfig parses an HCL file of attributes and blocks (a recipe, a
// layer file, a var file, sites.hcl) after checkInput, so that no input
// can exhaust the parser's stack.
func ParseConfig(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	if diags := checkInput(src, filename, hcl.InitialPos, configSyntax); diags.HasErrors() {
		return nil, diags
	}
	return hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
}

// ParseExpression parses one expression (a -var value) after checkInput.
func ParseExpression(src []byte, filename string) (hclsyntax.Expression, hcl.Diagnostics) {
	if diags := checkInput(src, filename, hcl.InitialPos, expressionSyntax); diags.HasErrors() {
		return nil, diags
	}
	return hclsyntax.ParseExpression(src, filename, hcl.InitialPos)
}

// ParseTemplate parses a template file after checkInput.
func ParseTemplate(src []byte, filename string) (hclsyntax.Expression, hcl.Diagnostics) {
	if diags := checkInput(src, filename, hcl.InitialPos, templateSyntax); diags.HasErrors() {
		return nil, diags
	}
	return hclsyntax.ParseTemplate(src, filename, hcl.InitialPos)
}

// checkInput is the guard in front of every HCL parser: it refuses input
// larger than MaxInputSize or nested deeper than MaxNesting, with a
// diagnostic at the place, before anything recurses on it. It reads the
// input with HCL's own lexer, which does not recurse, so strings, comments
// and heredocs count as they will parse.
func checkInput(src []byte, filename string, start hcl.Pos, mode syntaxMode) hcl.Diagnostics {
	if len(src) > MaxInputSize {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Input too large",
			Detail: fmt.Sprintf("%s is %d bytes; imagectl reads HCL input of at most %d bytes (1 MiB).",
				filename, len(src), MaxInputSize),
			Subject: &hcl.Range{Filename: filename, Start: start, End: start},
		}}
	}
	var tokens hclsyntax.Tokens
	switch mode {
	case templateSyntax:
		tokens, _ = hclsyntax.LexTemplate(src, filename, start)
	case expressionSyntax:
		tokens, _ = hclsyntax.LexExpression(src, filename, start)
	default:
		tokens, _ = hclsyntax.LexConfig(src, filename, start)
	}
	if t := tooDeep(tokens); t != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  SummaryTooDeep,
			Detail: fmt.Sprintf("This is nested more than %d levels deep, the most imagectl reads: each bracket, brace, parenthesis, quote, heredoc and template interpolation or directive is a level, and so is each operator within one expression.",
				MaxNesting),
			Subject: t.Range.Ptr(),
		}}
	}
	return nil
}

// tooDeep returns the first token at which the nesting exceeds MaxNesting,
// or nil. Each open bracket (of any kind) is a level; operators add a level
// each until the expression they are in ends: at a comma, at a newline
// where newlines end expressions (in a body or an object), or at the close
// of the bracket.
func tooDeep(tokens hclsyntax.Tokens) *hclsyntax.Token {
	type level struct {
		open hclsyntax.TokenType
		ops  int // operators seen in the current expression of this level
	}
	stack := []level{{open: hclsyntax.TokenNil}}
	depth := 0      // open levels plus the operators counted in them
	directives := 0 // open template if and for directives
	for i := range tokens {
		t := &tokens[i]
		top := &stack[len(stack)-1]
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			stack = append(stack, level{open: t.Type})
			depth++
			if t.Type == hclsyntax.TokenTemplateControl && i+1 < len(tokens) && tokens[i+1].Type == hclsyntax.TokenIdent {
				switch string(tokens[i+1].Bytes) {
				case "if", "for":
					directives++
					depth++
				case "endif", "endfor":
					if directives > 0 {
						directives--
						depth--
					}
				}
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			if len(stack) > 1 {
				depth -= top.ops + 1
				stack = stack[:len(stack)-1]
			}
		case hclsyntax.TokenComma:
			depth -= top.ops
			top.ops = 0
		case hclsyntax.TokenNewline, hclsyntax.TokenComment:
			// A # or // comment holds its line's newline, as the parser
			// reads it; a /* */ comment ends no line.
			if t.Type == hclsyntax.TokenComment && !bytes.HasSuffix(t.Bytes, []byte("\n")) {
				continue
			}
			if top.open == hclsyntax.TokenNil || top.open == hclsyntax.TokenOBrace {
				depth -= top.ops
				top.ops = 0
			}
		case hclsyntax.TokenStar:
			// A splat, [*], recurses in the expression that holds it.
			if i > 0 && tokens[i-1].Type == hclsyntax.TokenOBrack && len(stack) > 1 {
				stack[len(stack)-2].ops++
			} else {
				top.ops++
			}
			depth++
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenSlash, hclsyntax.TokenPercent,
			hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq,
			hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr,
			hclsyntax.TokenBang, hclsyntax.TokenQuestion:
			top.ops++
			depth++
		default:
			continue
		}
		if depth > MaxNesting {
			return t
		}
	}
	return nil
}
