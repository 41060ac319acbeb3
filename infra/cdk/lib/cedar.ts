// Cedar policy files named by the sources file (`[policy] cedar`, a toolkit's
// `cedar`), checked at synth as the functions check them at start
// (shared/catalog/src/cedar/validate.rs), with Cedar's own parser and
// validator (cedar-wasm): a mistake fails the deploy instead of every cold
// start. Every error names the file and the line.
//
// What is checked: the syntax, one id per policy (`@id`), no templates, and
// the schema (shared/catalog/src/cedar/executor.cedarschema) in strict mode:
// entity types, actions, every attribute of the principal and the tool, the
// counts, and the types of whatever compares them. What is not: accesses of
// `context.args`, an open record (each tool's arguments differ), so
// `context.args.id == 7` is accepted; and whether a tool a policy names
// exists (the catalog is not built at synth). The Rust side validates `args`
// open in a second pass; cedar-wasm has no open records (`partial-validate`),
// so the second pass here validates the text with each `context.args has x`
// replaced by a plain boolean of the same length, which a closed `args` would
// have typed `false`, hiding what follows it from the validator.

import * as fs from 'node:fs';
import * as path from 'node:path';

import * as cedar from '@cedar-policy/cedar-wasm/nodejs';

/** infra/cdk (this file runs as dist/lib/cedar.js). */
const PROJECT_DIR = path.resolve(__dirname, '..', '..');

/** The schema the functions validate against, in the repository (`include_str!` on the Rust side). */
export const SCHEMA_FILE = path.join(
  PROJECT_DIR,
  ...['..', '..', 'shared', 'catalog', 'src', 'cedar', 'executor.cedarschema'],
);

let schemaText: string | undefined;

function schema(): string {
  if (schemaText === undefined) {
    try {
      schemaText = fs.readFileSync(SCHEMA_FILE, 'utf8');
    } catch (e) {
      throw new Error(
        `config: cannot read the Cedar schema ${SCHEMA_FILE} (shared/catalog/src/cedar/executor.cedarschema ` +
          `of the repository) to validate the Cedar policies: ${(e as Error).message}`,
      );
    }
  }
  return schemaText;
}

interface Token {
  text: string;
  /** UTF-16 index in the text, and the one after the token. */
  start: number;
  end: number;
}

/** Cedar's tokens, without whitespace and comments; text that already parsed. */
function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    if (/\s/.test(text[i])) {
      i += 1;
      continue;
    }
    if (text.startsWith('//', i)) {
      const eol = text.indexOf('\n', i);
      i = eol < 0 ? text.length : eol;
      continue;
    }
    const start = i;
    if (text[i] === '"') {
      for (i += 1; i < text.length && text[i] !== '"'; i += text[i] === '\\' ? 2 : 1);
      i += 1;
    } else if (/[A-Za-z_]/.test(text[i])) {
      while (i < text.length && /\w/.test(text[i])) i += 1;
    } else {
      i += 1;
    }
    tokens.push({ text: text.slice(start, i), start, end: i });
  }
  return tokens;
}

const isIdent = (t: Token | undefined) => t !== undefined && /^[A-Za-z_]\w*$/.test(t.text);
const isString = (t: Token | undefined) => t !== undefined && t.text.startsWith('"');

/**
 * The token ranges of `context.args[.a|["a"]]* has a[.b]*` (or `has "a"`):
 * `[first token, last token]` indexes.
 */
function argsTests(tokens: Token[]): [number, number][] {
  const found: [number, number][] = [];
  const at = (i: number, text: string) => tokens[i]?.text === text;
  for (let k = 0; k < tokens.length; k++) {
    if (!at(k, 'context') || at(k - 1, '.') || !at(k + 1, '.') || !at(k + 2, 'args')) continue;
    let j = k + 3;
    for (;;) {
      if (at(j, '.') && isIdent(tokens[j + 1])) j += 2;
      else if (at(j, '[') && isString(tokens[j + 1]) && at(j + 2, ']')) j += 3;
      else break;
    }
    if (!at(j, 'has')) continue;
    j += 1;
    if (isString(tokens[j])) {
      found.push([k, j]);
    } else if (isIdent(tokens[j])) {
      while (at(j + 1, '.') && isIdent(tokens[j + 2])) j += 2;
      found.push([k, j]);
    }
  }
  return found;
}

/**
 * `text` with each `context.args has x` made `(1<2)` and spaces: a boolean
 * the validator cannot fold, at the same UTF-8 offsets and on the same lines.
 */
function argsTestsOpened(text: string, tokens: Token[]): string {
  let out = '';
  let from = 0;
  for (const [first, last] of argsTests(tokens)) {
    const { start } = tokens[first];
    const { end } = tokens[last];
    let blank = '';
    for (const ch of text.slice(start, end)) blank += ch === '\n' ? ch : ' '.repeat(Buffer.byteLength(ch));
    out += text.slice(from, start) + '(1<2)' + blank.slice(5);
    from = end;
  }
  return out + text.slice(from);
}

/** The line of UTF-8 byte `offset` of `bytes`, from 1. */
function lineOfByte(bytes: Buffer, offset: number): number {
  let line = 1;
  for (let i = 0; i < Math.min(offset, bytes.length); i++) if (bytes[i] === 0x0a) line += 1;
  return line;
}

/** The line of UTF-16 index `index` of `text`, from 1. */
function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/** A Cedar diagnostic as one line: its message, its label, its help. */
function oneLine(error: cedar.DetailedError, rename: (s: string) => string = (s) => s): string {
  const strip = (s: string) =>
    rename(s)
      .replace(/^failed to parse polic(y|ies) from string: /, '')
      .replace(/^for policy `[^`]*`, /, '');
  let message = strip(error.message);
  const label = error.sourceLocations?.find((l) => l.label)?.label;
  if (label) message += `; ${label}`;
  if (error.help) message += ` (${strip(error.help)})`;
  return message;
}

interface Named {
  /** The `@id`, or `<file name>:<line>` as the functions name it. */
  name: string;
  line: number;
}

/**
 * Checks the Cedar policies at `file` as the functions do at start; throws
 * `config: <file>:<line>: <what is wrong>` for the first mistake (by line).
 */
export function checkCedar(file: string): void {
  const text = fs.readFileSync(file, 'utf8');
  const bytes = Buffer.from(text, 'utf8');
  // Typed so that the compiler knows it does not return.
  const fail: (line: number, message: string) => never = (line, message) => {
    throw new Error(`config: ${file}:${line}: ${message}`);
  };

  // (a) The syntax (templates are allowed by this parser; refused below).
  const parsed = cedar.policySetTextToParts(text);
  if (parsed.type === 'failure') {
    const error = parsed.errors[0];
    fail(lineOfByte(bytes, error?.sourceLocations?.[0]?.start ?? 0), error ? oneLine(error) : 'cannot be parsed');
  }

  // Each policy's text, in order: the parser names them policy0, policy1, ...
  // Every policy ends with the first `;` outside strings and comments.
  const tokens = tokenize(text);
  const policies: Named[] = [];
  const seen = new Set<string>();
  for (let first = 0; first < tokens.length; ) {
    let last = first;
    while (last < tokens.length - 1 && tokens[last].text !== ';') last += 1;
    const start = tokens[first].start;
    const line = lineOf(text, start);
    const own = text.slice(start, tokens[last].end);
    first = last + 1;
    const json = cedar.policyToJson(own);
    if (json.type === 'failure') {
      if (cedar.templateToJson(own).type === 'success') {
        fail(line, 'policy templates (`?principal`, `?resource`) are not supported; write each policy out');
      }
      fail(line, json.errors[0] ? oneLine(json.errors[0]) : 'cannot be parsed');
    } else {
      const annotations = json.json.annotations ?? {};
      const name = 'id' in annotations ? (annotations.id ?? '') : `${path.basename(file)}:${line}`;
      if (seen.has(name)) fail(line, `two policies have the id \`${name}\`; give each its own @id("...")`);
      seen.add(name);
      policies.push({ name, line });
    }
  }
  if (policies.length !== parsed.policies.length) {
    throw new Error(`config: ${file}: found ${policies.length} policies where Cedar parsed ${parsed.policies.length}`);
  }

  // (b) The schema, strict: `args` closed (every check but the accesses of
  // `context.args`), then with each `context.args has x` a plain boolean.
  const rename = (s: string) =>
    s.replace(/`policy(\d+)`/g, (whole, n: string) => {
      const policy = policies[Number(n)];
      return policy ? `\`${policy.name}\`` : whole;
    });
  const errors: { line: number; policy: string; message: string }[] = [];
  for (const version of [text, argsTestsOpened(text, tokens)]) {
    const answer = cedar.validate({
      schema: schema(),
      policies: { staticPolicies: version },
      validationSettings: { mode: 'strict' },
    });
    if (answer.type === 'failure') {
      const why = answer.errors.map((e) => oneLine(e)).join('; ');
      throw new Error(`config: ${file}: Cedar could not validate the policies against ${SCHEMA_FILE}: ${why}`);
    }
    const versionBytes = Buffer.from(version, 'utf8');
    for (const { policyId, error } of answer.validationErrors) {
      const at = error.sourceLocations?.[0];
      if (at && onArgs(error.message, versionBytes.subarray(at.start, at.end).toString('utf8'))) continue;
      const policy = policies[Number(policyId.replace(/^policy/, ''))];
      const entry = {
        line: at ? lineOfByte(versionBytes, at.start) : (policy?.line ?? 1),
        policy: policy?.name ?? policyId,
        message: oneLine(error, rename),
      };
      if (!errors.some((e) => e.line === entry.line && e.policy === entry.policy && e.message === entry.message)) {
        errors.push(entry);
      }
    }
  }
  errors.sort((a, b) => a.line - b.line || a.policy.localeCompare(b.policy) || a.message.localeCompare(b.message));
  const first = errors[0];
  if (first) fail(first.line, `policy \`${first.policy}\`: ${first.message}`);
}

/**
 * An attribute access refused only because `args` is closed (`attribute
 * `args.x` in context for ... not found`): the text it points at starts with
 * `context.args`, whitespace ignored.
 */
function onArgs(message: string, snippet: string): boolean {
  return (
    /\battribute `args[.[]/.test(message) &&
    /\bnot found\b/.test(message) &&
    snippet.replace(/\s/g, '').startsWith('context.args')
  );
}
