// FCL as a CodeMirror 6 language: a stream tokenizer that follows the compiler's lexer
// (fcl/syntax/lexer.py) and the Pygments lexer (fcl/highlight.py) where a line-by-line
// tokenizer can.
import {
  LanguageSupport,
  StreamLanguage,
  StringStream,
  syntaxHighlighting
} from '@codemirror/language';
import { classHighlighter, Tag, tagHighlighter } from '@lezer/highlight';

import { BUILTINS, CONSTANTS, KEYWORDS, LEVELS, TYPES } from './names';

/** Level annotations (`<grid>`, `<block>`, `<thread>`): no standard tag fits them. */
const levelTag = Tag.define();

interface IFCLState {
  commentDepth: number; // how many `(* *)` comments are open: they nest
  inCode: boolean; // past the magic lines (`%...`, `%%...`) at the top of a cell
  afterName: boolean; // after a name, `]` or `do`, where `<` may open a level list
  defining: boolean; // after `sig`, `fun` or `val`: the next name is being defined
  inLevels: boolean; // between the `<` and `>` of a level list
}

const IDENT = /^(?:\p{L}|#)[\p{L}\p{N}_#']*/u;
const TYPE_VARIABLE = /^'(?:\p{L}|#)[\p{L}\p{N}_#']*/u;
// `-` directly before a digit belongs to the literal, as in the compiler (`f -1`).
const NUMBER = /^-?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)?)/;
const OPERATOR = /^(?:\|>|\|\||&&|==|!=|<=|>=|<<|>>|<-|=>|->|[<>+\-*/%&|^=])/;
const PUNCTUATION = /^[.:,;()[\]{}]/;
// A whole level list ahead: `<>` or `<lvl, ...>` with lvl ::= name | 1 + lvl. Otherwise `<` is
// less-than (the compiler's mark_level_brackets decides the same way).
const LEVEL = String.raw`(?:1\s*\+\s*)*(?:\p{L}|#)[\p{L}\p{N}_#']*`;
const LEVEL_LIST = new RegExp(String.raw`^<\s*(?:${LEVEL}\s*(?:,\s*${LEVEL}\s*)*)?>`, 'u');
const MAGIC = /^\s*%%?[^\W\d]/u;

const keywords = new Set(KEYWORDS);
const types = new Set(TYPES);
const constants = new Set(CONSTANTS);
const levels = new Set(LEVELS);
const builtins = new Set(BUILTINS);
const definers = new Set(['sig', 'fun', 'val']);

function blockComment(stream: StringStream, state: IFCLState): string {
  while (!stream.eol()) {
    if (stream.match('(*')) {
      state.commentDepth++;
    } else if (stream.match('*)')) {
      if (--state.commentDepth === 0) {
        break;
      }
    } else {
      stream.next();
    }
  }
  return 'comment';
}

function string(stream: StringStream): string {
  stream.next(); // the opening quote
  while (!stream.eol()) {
    const ch = stream.next();
    if (ch === '\\') {
      stream.next();
    } else if (ch === '"') {
      break;
    }
  }
  return 'string';
}

function levelListPart(stream: StringStream, state: IFCLState): string | null {
  if (stream.eat('>')) {
    state.inLevels = false;
    return 'level';
  }
  if (stream.eat('1')) {
    return 'number';
  }
  if (stream.eat('+')) {
    return 'operator';
  }
  if (stream.eat(',')) {
    return 'punctuation';
  }
  const word = stream.match(IDENT) as RegExpMatchArray;
  // LEVEL_LIST matched the whole list before we entered it, so only names are left.
  return levels.has(word[0]) ? 'level' : 'variableName.special';
}

function word(name: string, state: IFCLState): string | null {
  const defining = state.defining;
  state.defining = definers.has(name);
  if (keywords.has(name)) {
    return 'keyword';
  }
  if (types.has(name)) {
    return 'typeName';
  }
  if (constants.has(name)) {
    return 'bool';
  }
  if (defining) {
    return 'variableName.definition';
  }
  // `grid`, `block` and `thread` outside a level list are ordinary names, as in the compiler.
  return builtins.has(name) ? 'variableName.standard' : 'variableName';
}

function token(stream: StringStream, state: IFCLState): string | null {
  if (state.commentDepth > 0) {
    return blockComment(stream, state);
  }
  if (!state.inCode && stream.sol()) {
    // The whole magic line is one token: in `%%memory --pitch 64`, `--` is no comment.
    if (stream.match(MAGIC, false)) {
      stream.skipToEnd();
      return 'meta';
    }
    if (stream.match(/^\s*$/)) {
      return null;
    }
    state.inCode = true;
  }
  if (stream.eatSpace()) {
    return null;
  }
  if (state.inLevels) {
    return levelListPart(stream, state);
  }
  const afterName = state.afterName;
  state.afterName = false;
  if (stream.match('--')) {
    stream.skipToEnd();
    return 'comment';
  }
  if (stream.match('(*')) {
    state.commentDepth = 1;
    return blockComment(stream, state);
  }
  if (stream.peek() === '"') {
    return string(stream);
  }
  if (stream.match(NUMBER)) {
    return 'number';
  }
  if (afterName && stream.match(LEVEL_LIST, false)) {
    stream.next();
    state.inLevels = true;
    return 'level';
  }
  const name = stream.match(IDENT) as RegExpMatchArray | null;
  if (name) {
    state.afterName = true;
    return word(name[0], state);
  }
  if (stream.match(TYPE_VARIABLE)) {
    return 'typeName';
  }
  if (stream.eat(']')) {
    state.afterName = true;
    return 'punctuation';
  }
  if (stream.match(OPERATOR)) {
    return 'operator';
  }
  if (stream.match(PUNCTUATION)) {
    return 'punctuation';
  }
  stream.next();
  return 'invalid'; // a character the compiler rejects
}

const fclLanguage = StreamLanguage.define<IFCLState>({
  name: 'fcl',
  startState: () => ({
    commentDepth: 0,
    inCode: false,
    afterName: false,
    defining: false,
    inLevels: false
  }),
  token,
  tokenTable: { level: levelTag },
  languageData: {
    commentTokens: { line: '--', block: { open: '(*', close: '*)' } }
  }
});

/**
 * The language with its highlighters. JupyterLab's theme colours the standard tags; the class
 * highlighter adds stable `tok-*` classes (`tok-keyword`, `tok-comment`) for stylesheets and
 * tests, and levels get `fcl-level`, coloured in style/index.css.
 */
export function fcl(): LanguageSupport {
  return new LanguageSupport(fclLanguage, [
    syntaxHighlighting(tagHighlighter([{ tag: levelTag, class: 'fcl-level' }])),
    syntaxHighlighting(classHighlighter)
  ]);
}
