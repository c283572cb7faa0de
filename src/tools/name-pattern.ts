/** Longest glob accepted; the pattern comes from the script. */
export const MAX_NAME_PATTERN_CHARS = 1_000;
/** Most alternatives a pattern's `{a,b}` groups may expand to. */
export const MAX_NAME_PATTERN_ALTERNATIVES = 256;

/** A compiled glob over file names. */
export interface NamePattern {
  /** True when the whole name matches. */
  test(name: string): boolean;
}

/** Thrown for a pattern that is too long or expands to too many alternatives; the message says which. */
export class NamePatternError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NamePatternError';
  }
}

/**
 * Compiles a glob over file names (not paths): `*` any run of characters, `?` one character, `[abc]` / `[a-z]` /
 * `[!abc]` a class, `{ts,js}` alternatives (nestable), `\` escapes the next character. `*` also matches names starting
 * with a dot; an unclosed `[` or `{` is taken literally. Matching never backtracks exponentially (unlike a regular
 * expression built from the glob, where `*a*a*a*b` against a long name would stall the host), so a script's pattern is
 * safe to run.
 *
 * @throws NamePatternError when the pattern is longer than {@link MAX_NAME_PATTERN_CHARS} or its `{}` groups expand to
 * more than {@link MAX_NAME_PATTERN_ALTERNATIVES} alternatives.
 */
export function compileNamePattern(pattern: string): NamePattern {
  if (pattern.length > MAX_NAME_PATTERN_CHARS) {
    throw new NamePatternError(`the pattern is longer than ${MAX_NAME_PATTERN_CHARS} characters`);
  }
  const alternatives = expand(parse(pattern));
  if (alternatives === undefined) {
    throw new NamePatternError(
      `the pattern's {} groups expand to more than ${MAX_NAME_PATTERN_ALTERNATIVES} alternatives`,
    );
  }
  return {
    test(name: string): boolean {
      const characters = Array.from(name);
      return alternatives.some((tokens) => matchTokens(tokens, characters));
    },
  };
}

interface ClassRange {
  readonly from: number;
  readonly to: number;
}

type Token =
  | { readonly kind: 'literal'; readonly character: string }
  | { readonly kind: 'any' }
  | { readonly kind: 'star' }
  | { readonly kind: 'class'; readonly negated: boolean; readonly ranges: readonly ClassRange[] };

type PatternNode = Token | { readonly kind: 'alternatives'; readonly options: readonly PatternNode[][] };

function parse(pattern: string): PatternNode[] {
  const characters = Array.from(pattern);
  const openingBraces = findMatchedBraces(characters);
  let index = 0;
  const sequence = (insideBraces: boolean): PatternNode[] => {
    const nodes: PatternNode[] = [];
    while (index < characters.length) {
      const character = characters[index] as string;
      if (insideBraces && (character === ',' || character === '}')) return nodes;
      index += 1;
      if (character === '\\' && index < characters.length) {
        nodes.push({ kind: 'literal', character: characters[index] as string });
        index += 1;
      } else if (character === '*') {
        nodes.push({ kind: 'star' });
      } else if (character === '?') {
        nodes.push({ kind: 'any' });
      } else if (character === '[') {
        const parsed = parseClass(characters, index);
        if (parsed === undefined) nodes.push({ kind: 'literal', character });
        else {
          nodes.push(parsed.token);
          index = parsed.next;
        }
      } else if (character === '{' && openingBraces.has(index - 1)) {
        const options: PatternNode[][] = [];
        for (;;) {
          options.push(sequence(true));
          const separator = characters[index];
          index += 1;
          if (separator !== ',') break;
        }
        nodes.push({ kind: 'alternatives', options });
      } else {
        nodes.push({ kind: 'literal', character });
      }
    }
    return nodes;
  };
  return sequence(false);
}

// Positions of `{` that have a matching `}`; the others are literal.
function findMatchedBraces(characters: readonly string[]): Set<number> {
  const open: number[] = [];
  const matched = new Set<number>();
  for (let index = 0; index < characters.length; index += 1) {
    const character = characters[index];
    if (character === '\\') index += 1;
    else if (character === '{') open.push(index);
    else if (character === '}') {
      const start = open.pop();
      if (start !== undefined) matched.add(start);
    }
  }
  return matched;
}

// `start` is just after `[`; a `]` right after `[` or `[!` belongs to the class. Undefined when it never closes.
function parseClass(characters: readonly string[], start: number): { token: Token; next: number } | undefined {
  let index = start;
  let negated = false;
  if (characters[index] === '!' || characters[index] === '^') {
    negated = true;
    index += 1;
  }
  const ranges: ClassRange[] = [];
  let first = true;
  while (index < characters.length) {
    let character = characters[index] as string;
    if (character === ']' && !first) return { token: { kind: 'class', negated, ranges }, next: index + 1 };
    first = false;
    if (character === '\\' && index + 1 < characters.length) {
      index += 1;
      character = characters[index] as string;
    }
    index += 1;
    const low = character.codePointAt(0) ?? 0;
    if (characters[index] === '-' && index + 1 < characters.length && characters[index + 1] !== ']') {
      const high = (characters[index + 1] as string).codePointAt(0) ?? 0;
      ranges.push({ from: low, to: high });
      index += 2;
    } else {
      ranges.push({ from: low, to: low });
    }
  }
  return undefined;
}

// Multiplies out the `{}` groups; undefined when that would exceed the cap.
function expand(nodes: readonly PatternNode[]): Token[][] | undefined {
  let results: Token[][] = [[]];
  for (const node of nodes) {
    if (node.kind !== 'alternatives') {
      for (const result of results) result.push(node);
      continue;
    }
    const next: Token[][] = [];
    for (const option of node.options) {
      const expanded = expand(option);
      if (expanded === undefined) return undefined;
      for (const prefix of results) {
        for (const suffix of expanded) {
          next.push([...prefix, ...suffix]);
          if (next.length > MAX_NAME_PATTERN_ALTERNATIVES) return undefined;
        }
      }
    }
    results = next;
  }
  return results;
}

// Classic wildcard matching: on a mismatch, retry from the last `*` one character further. O(name × pattern).
function matchTokens(tokens: readonly Token[], name: readonly string[]): boolean {
  let tokenIndex = 0;
  let nameIndex = 0;
  let starTokenIndex = -1;
  let starNameIndex = 0;
  while (nameIndex < name.length) {
    const token = tokens[tokenIndex];
    if (token?.kind === 'star') {
      starTokenIndex = tokenIndex;
      starNameIndex = nameIndex;
      tokenIndex += 1;
    } else if (token !== undefined && matchesOne(token, name[nameIndex] as string)) {
      tokenIndex += 1;
      nameIndex += 1;
    } else if (starTokenIndex !== -1) {
      tokenIndex = starTokenIndex + 1;
      starNameIndex += 1;
      nameIndex = starNameIndex;
    } else {
      return false;
    }
  }
  while (tokens[tokenIndex]?.kind === 'star') tokenIndex += 1;
  return tokenIndex === tokens.length;
}

function matchesOne(token: Exclude<Token, { kind: 'star' }>, character: string): boolean {
  switch (token.kind) {
    case 'literal':
      return token.character === character;
    case 'any':
      return true;
    case 'class': {
      const point = character.codePointAt(0) ?? 0;
      const inside = token.ranges.some((range) => point >= range.from && point <= range.to);
      return inside !== token.negated;
    }
  }
}

/** A compiled glob over relative paths, given as their components. */
export interface PathPattern {
  /** True when the whole path matches. */
  test(components: readonly string[]): boolean;
}

/** Whether a `list_files` pattern is a path pattern (it has a `/` or a `**`), which implies a recursive listing. */
export function isPathPattern(pattern: string): boolean {
  return pattern.includes('/') || pattern.includes('**');
}

/**
 * Compiles a glob over relative paths: split on `/`, each segment is a {@link compileNamePattern} glob over one
 * component, and a segment `**` matches any number of components (none included), so `**\/*.md` matches `a.md` and
 * `docs/deep/b.md`. A `{}` group cannot hold a `/`. Matching is O(components × segments), memoised.
 *
 * @throws NamePatternError as {@link compileNamePattern} does, for a segment or for the whole pattern's length.
 */
export function compilePathPattern(pattern: string): PathPattern {
  if (pattern.length > MAX_NAME_PATTERN_CHARS) {
    throw new NamePatternError(`the pattern is longer than ${MAX_NAME_PATTERN_CHARS} characters`);
  }
  const segments = pattern
    .split('/')
    .filter((segment, index, all) => segment !== '' || (index > 0 && index < all.length - 1))
    .map((segment) => (segment === '**' ? 'any-depth' : compileNamePattern(segment)));
  return {
    test(components: readonly string[]): boolean {
      // matches[s][c]: segments from s match components from c; filled from the end.
      const width = components.length + 1;
      const matches = new Uint8Array((segments.length + 1) * width);
      matches[segments.length * width + components.length] = 1;
      for (let s = segments.length - 1; s >= 0; s -= 1) {
        const segment = segments[s];
        for (let c = components.length; c >= 0; c -= 1) {
          let matched: boolean;
          if (segment === 'any-depth') {
            matched = matches[(s + 1) * width + c] === 1 || (c < components.length && matches[s * width + c + 1] === 1);
          } else {
            matched =
              c < components.length &&
              segment !== undefined &&
              segment.test(components[c] as string) &&
              matches[(s + 1) * width + c + 1] === 1;
          }
          matches[s * width + c] = matched ? 1 : 0;
        }
      }
      return matches[0] === 1;
    },
  };
}
