import { describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { compileDeniedPaths } from '../../src/tools/denied-paths.js';
import { createFileAccessPolicy, isVersionControlName } from '../../src/tools/file-access-policy.js';

const split = (text: string): string[] => text.split('/');

describe('compileDeniedPaths', () => {
  it.each([
    // pattern, path, is a directory, denied
    ['.env', '.env', false, true],
    ['.env', 'app/config/.env', false, true],
    ['.env', '.env.example', false, false],
    ['*.pem', 'certs/server.pem', false, true],
    ['*.pem', 'server.pem.txt', false, false],
    ['secrets/', 'secrets', true, true],
    ['secrets/', 'secrets/key.txt', false, true],
    ['secrets/', 'a/b/secrets/deep/key.txt', false, true],
    ['secrets/', 'secrets', false, false],
    ['/config/production.json', 'config/production.json', false, true],
    ['/config/production.json', 'app/config/production.json', false, false],
    ['config/production.json', 'app/config/production.json', false, false],
    ['/build', 'build/out.js', false, true],
    ['/build', 'src/build/out.js', false, false],
    ['docs/**/private*', 'docs/private.md', false, true],
    ['docs/**/private*', 'docs/a/b/private-notes.md', false, true],
    ['docs/**/private*', 'other/docs/private.md', false, false],
    ['**/id_rsa*', 'home/.ssh/id_rsa.pub', false, true],
    ['**/id_rsa*', 'id_rsa', false, true],
    ['private/**', 'private/x.txt', false, true],
    ['private/**', 'private/a/b', true, true],
    ['private/**', 'private', true, false],
    ['data/*.csv', 'data/a.csv', false, true],
    ['data/*.csv', 'data/sub/a.csv', false, false],
    ['key?.txt', 'key1.txt', false, true],
    ['key[0-9].txt', 'keyx.txt', false, false],
    ['\\#notes', '#notes', false, true],
    ['trailing-space.txt   ', 'trailing-space.txt', false, true],
  ])('%s against %s (directory: %s) → denied %s', (pattern, target, isDirectory, denied) => {
    expect(compileDeniedPaths([pattern]).matches(split(target), isDirectory)).toBe(denied);
  });

  it('ignores blank lines and comments, so a .gitignore can be pasted', () => {
    const denied = compileDeniedPaths(['# secrets', '', '   ', '*.key']);
    expect(denied.patterns).toEqual(['*.key']);
    expect(denied.matches(['a.key'], false)).toBe(true);
    expect(denied.matches(['# secrets'], false)).toBe(false);
  });

  it.each([
    [['!keep.txt'], 'negates'],
    [[42], 'is not a string pattern'],
    [['/'], 'names no path'],
    [[`${'{a,b}'.repeat(9)}`], 'expand to more than'],
  ])('refuses %j with INVALID_CONFIG', (patterns, message) => {
    try {
      compileDeniedPaths(patterns as string[]);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(CodecallError);
      expect((error as CodecallError).code).toBe('INVALID_CONFIG');
      expect((error as CodecallError).message).toContain(message);
    }
  });

  it('matches a very deep hostile path in linear steps, whatever the ** segments', () => {
    const denied = compileDeniedPaths(['**/a/**/a/**/a/**/b/**/c']);
    const components = Array.from({ length: 2_000 }, () => 'a');
    // A matcher that retried every split of the path between the ** segments would not finish.
    expect(denied.matches(components, false)).toBe(false);
    expect(denied.matches([...components, 'b', 'c'], false)).toBe(true);
  });
});

describe('isVersionControlName', () => {
  it.each([
    '.git',
    '.GIT',
    '.Git',
    '.hg',
    '.HG',
    '.svn',
    '.git.',
    '.git ',
    '.git. . ',
    '.g\u200Cit',
    '\uFEFF.git',
    'GIT~1',
    'git~2',
  ])('%j is version-control metadata', (name) => {
    expect(isVersionControlName(name)).toBe(true);
  });

  it.each(['.github', '.gitignore', '.gitattributes', 'git', '.git-backup', 'x.git', '.svnignore', '.hgrc'])(
    '%j is not',
    (name) => {
      expect(isVersionControlName(name)).toBe(false);
    },
  );
});

describe('createFileAccessPolicy', () => {
  it('refuses writes into version-control metadata at any depth, and allows reading it', () => {
    const policy = createFileAccessPolicy({});
    expect(policy.refusal(['.git', 'config'], false, 'write')).toBe(
      'is version-control metadata (.git), which the file tools do not write',
    );
    expect(policy.refusal(['sub', '.GIT', 'hooks', 'pre-commit'], false, 'write')).toContain('(.GIT)');
    expect(policy.refusal(['.git'], false, 'write')).toContain('version-control metadata');
    expect(policy.refusal(['.git', 'config'], false, 'read')).toBeUndefined();
    expect(policy.refusal(['.github', 'workflows', 'ci.yml'], false, 'write')).toBeUndefined();
  });

  it('allows version-control writes when asked to', () => {
    const policy = createFileAccessPolicy({ allowVersionControlWrites: true });
    expect(policy.refusal(['.git', 'config'], false, 'write')).toBeUndefined();
  });

  it('keeps unreachable directories out of every access and every listing', () => {
    const policy = createFileAccessPolicy({ unreachable: [['codecall-0']] });
    expect(policy.refusal(['codecall-0'], true, 'read')).toContain("codecall's own state folder");
    expect(policy.refusal(['codecall-0', 'runs', 'x', 'artifacts'], true, 'read')).toContain('state folder');
    expect(policy.refusal(['codecall-0', 'new.txt'], false, 'write')).toContain('state folder');
    expect(policy.refusal(['codecall-01'], true, 'read')).toBeUndefined();
    expect(policy.hides(['codecall-0'], true)).toBe(true);
    expect(policy.hides(['other'], true)).toBe(false);
  });

  it('refuses a bad allowVersionControlWrites', () => {
    expect(() => createFileAccessPolicy({ allowVersionControlWrites: 'yes' as unknown as boolean })).toThrow(
      'files.allowVersionControlWrites must be true or false, got "yes"',
    );
  });
});
