import { CodecallError } from '../core/errors.js';
import type { NamePattern } from './name-pattern.js';
import { compileNamePattern, NamePatternError } from './name-pattern.js';

/** Paths of the workspace the file tools may never read or write, from gitignore-style patterns. */
export interface DeniedPaths {
  /** The patterns as configured (blank lines and comments dropped). */
  readonly patterns: readonly string[];
  /**
   * True when the path (components relative to the workspace root) or one of its parent directories matches a
   * pattern. `isDirectory` says what the last component is (its parents are directories).
   */
  matches(components: readonly string[], isDirectory: boolean): boolean;
}

/** A `**` segment: any number of directories. */
const ANY_DEPTH = Symbol('any depth');

type Segment = NamePattern | typeof ANY_DEPTH;

/** One path component, whatever its name. */
const ANY_NAME: NamePattern = { test: () => true };

interface CompiledPattern {
  readonly segments: readonly Segment[];
  readonly directoryOnly: boolean;
}

/**
 * Compiles gitignore-style patterns: `*`, `?`, `[a-z]` within one path component, `**` for any number of
 * directories, a pattern without `/` (other than a trailing one) matches a name at any depth, one with a `/` is
 * anchored at the workspace root, a trailing `/` matches directories only, and a matching directory covers everything
 * under it. Blank patterns and `#` comments are ignored. Negation (`!pattern`) is not supported: a denied path
 * cannot be re-allowed. Matching is linear in the path length, whatever the patterns.
 *
 * @throws CodecallError('INVALID_CONFIG') naming a pattern that is not a string, negates, or cannot be compiled.
 */
export function compileDeniedPaths(patterns: readonly string[]): DeniedPaths {
  if (!Array.isArray(patterns)) {
    throw new CodecallError('INVALID_CONFIG', 'files.deniedPaths must be an array of gitignore-style patterns', {
      deniedPaths: patterns,
    });
  }
  const kept: string[] = [];
  const compiled: CompiledPattern[] = [];
  for (const pattern of patterns) {
    const parsed = compilePattern(pattern);
    if (parsed === undefined) continue;
    kept.push(pattern);
    compiled.push(parsed);
  }
  return {
    patterns: kept,
    matches: (components, isDirectory) => compiled.some((pattern) => matchesPattern(pattern, components, isDirectory)),
  };
}

function compilePattern(pattern: unknown): CompiledPattern | undefined {
  if (typeof pattern !== 'string') {
    throw new CodecallError('INVALID_CONFIG', `files.deniedPaths: ${JSON.stringify(pattern)} is not a string pattern`, {
      pattern,
    });
  }
  // Trailing blanks are dropped unless escaped, as in .gitignore.
  let text = pattern.replace(/(?<!\\)[ \t]+$/, '');
  if (text === '' || text.startsWith('#')) return undefined;
  if (text.startsWith('!')) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `files.deniedPaths: ${JSON.stringify(pattern)} negates; a denied path cannot be re-allowed, list only what to deny`,
      { pattern },
    );
  }
  const directoryOnly = text.endsWith('/');
  text = text.replace(/\/+$/, '');
  const anchored = text.includes('/');
  const names = text.split('/').filter((name) => name !== '');
  if (names.length === 0) {
    throw new CodecallError('INVALID_CONFIG', `files.deniedPaths: ${JSON.stringify(pattern)} names no path`, {
      pattern,
    });
  }
  const segments: Segment[] = anchored ? [] : [ANY_DEPTH];
  for (const name of names) {
    if (name === '**') {
      if (segments.at(-1) !== ANY_DEPTH) segments.push(ANY_DEPTH);
      continue;
    }
    try {
      segments.push(compileNamePattern(name));
    } catch (error) {
      if (!(error instanceof NamePatternError)) throw error;
      throw new CodecallError('INVALID_CONFIG', `files.deniedPaths: ${JSON.stringify(pattern)}: ${error.message}`, {
        pattern,
      });
    }
  }
  // A trailing `**` covers what is inside a directory, not the directory itself: one component, then any number.
  if (segments.at(-1) === ANY_DEPTH) segments.splice(-1, 1, ANY_NAME, ANY_DEPTH);
  return { segments, directoryOnly };
}

// A match may end at any component: a matching directory denies everything under it. Each (segment, component)
// pair is tried at most once, so matching costs at most segments × components steps whatever the `**` segments.
function matchesPattern(pattern: CompiledPattern, components: readonly string[], isDirectory: boolean): boolean {
  const { segments, directoryOnly } = pattern;
  const failed = new Set<number>();
  const width = components.length + 1;
  const matchFrom = (segmentIndex: number, componentIndex: number): boolean => {
    if (segmentIndex === segments.length) {
      // A proper prefix is a directory; the whole path is what `isDirectory` says.
      return componentIndex < components.length || !directoryOnly || isDirectory;
    }
    const key = segmentIndex * width + componentIndex;
    if (failed.has(key)) return false;
    const segment = segments[segmentIndex] as Segment;
    const matched =
      segment === ANY_DEPTH
        ? matchFrom(segmentIndex + 1, componentIndex) ||
          (componentIndex < components.length && matchFrom(segmentIndex, componentIndex + 1))
        : componentIndex < components.length &&
          segment.test(components[componentIndex] as string) &&
          matchFrom(segmentIndex + 1, componentIndex + 1);
    if (!matched) failed.add(key);
    return matched;
  };
  return matchFrom(0, 0);
}
