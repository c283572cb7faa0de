/** Longest name compared for a suggestion (the names come from the script's error message). */
const MAX_COMPARED_NAME_CHARS = 100;

/** Edit distance (insertions, deletions, substitutions, swaps of neighbours) between two short names. */
export function editDistance(left: string, right: string): number {
  const rows = left.length + 1;
  const columns = right.length + 1;
  const distances: number[] = new Array(rows * columns).fill(0);
  const at = (row: number, column: number): number => distances[row * columns + column] ?? 0;
  for (let row = 0; row < rows; row += 1) distances[row * columns] = row;
  for (let column = 0; column < columns; column += 1) distances[column] = column;
  for (let row = 1; row < rows; row += 1) {
    for (let column = 1; column < columns; column += 1) {
      const cost = left[row - 1] === right[column - 1] ? 0 : 1;
      let best = Math.min(at(row - 1, column) + 1, at(row, column - 1) + 1, at(row - 1, column - 1) + cost);
      if (row > 1 && column > 1 && left[row - 1] === right[column - 2] && left[row - 2] === right[column - 1]) {
        best = Math.min(best, at(row - 2, column - 2) + 1);
      }
      distances[row * columns + column] = best;
    }
  }
  return at(rows - 1, columns - 1);
}

/**
 * The candidate closest to a misspelled `name` (case-insensitive edit distance at most a third of its length, at least
 * 1, at most 3), or undefined when none is close. Ties go to the earlier candidate.
 */
export function closestName(name: string, candidates: readonly string[]): string | undefined {
  if (name.length === 0 || name.length > MAX_COMPARED_NAME_CHARS) return undefined;
  const allowed = Math.min(3, Math.max(1, Math.floor(name.length / 3)));
  let best: string | undefined;
  let bestDistance = allowed + 1;
  for (const candidate of candidates) {
    if (candidate === name || Math.abs(candidate.length - name.length) > allowed) continue;
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
