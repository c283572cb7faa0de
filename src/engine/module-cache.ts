import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** A generated file, relative to the folder that goes on `sys.path`. */
export interface ModuleFile {
  readonly path: string;
  readonly content: string;
}

/**
 * Writes generated module files into `<modulesRoot>/<content hash>/` once and returns that folder. Identical
 * tool sets share one folder; concurrent writers race safely (write to a temporary folder, then rename).
 */
export async function materializeModule(modulesRoot: string, files: readonly ModuleFile[]): Promise<string> {
  const hash = createHash('sha256');
  for (const file of files) hash.update(file.path).update('\0').update(file.content).update('\0');
  const target = join(modulesRoot, hash.digest('hex').slice(0, 24));
  if (await stat(target).then(
    () => true,
    () => false,
  )) {
    return target;
  }
  const temporary = join(modulesRoot, `.tmp-${randomBytes(6).toString('hex')}`);
  try {
    for (const file of files) {
      const path = join(temporary, file.path);
      await mkdir(dirname(path), { recursive: true, mode: 0o755 });
      await writeFile(path, file.content, { mode: 0o644 });
    }
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { recursive: true, force: true });
    const exists = await stat(target).then(
      () => true,
      () => false,
    );
    if (!exists) throw error;
  }
  return target;
}
