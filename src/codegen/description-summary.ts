/** Longest summary of a tool description (the function lists of the model-facing description use it). */
export const MAX_SUMMARY_LENGTH = 120;

const ELLIPSIS = '...';
// A sentence ends at . ! or ? followed by a space and a capital, digit, quote or bracket, so "e.g. a file" stays whole.
const SENTENCE_END = /[.!?](?=\s+[A-Z0-9"'`([])/;
const PARAGRAPH_BREAK = /\n\s*\n/;
// Whitespace other than single spaces: only then does collapsing change the text.
const COLLAPSIBLE_WHITESPACE = /\s\s|[^\S ]/;

/**
 * The first sentence of a description's first paragraph, whitespace collapsed, at most {@link MAX_SUMMARY_LENGTH}
 * characters (cut at a word boundary and ended with `...` when longer). Empty for an empty description.
 */
export function summarizeDescription(description: string, maxLength: number = MAX_SUMMARY_LENGTH): string {
  const text = description.trim();
  const paragraphEnd = PARAGRAPH_BREAK.exec(text);
  const paragraph = paragraphEnd === null ? text : text.slice(0, paragraphEnd.index);
  const sentenceEnd = SENTENCE_END.exec(paragraph);
  return shortenText(sentenceEnd === null ? paragraph : paragraph.slice(0, sentenceEnd.index + 1), maxLength);
}

/**
 * `text` with whitespace collapsed, cut at a word boundary and ended with `...` when longer than `maxLength`
 * characters (the result never is).
 */
export function shortenText(text: string, maxLength: number): string {
  const collapsed = COLLAPSIBLE_WHITESPACE.test(text) ? text.replace(/\s+/g, ' ').trim() : text.trim();
  if (collapsed.length <= maxLength) return collapsed;
  const room = collapsed.slice(0, maxLength - ELLIPSIS.length + 1);
  const lastSpace = room.lastIndexOf(' ');
  const cut = lastSpace > 0 ? room.slice(0, lastSpace) : room.slice(0, maxLength - ELLIPSIS.length);
  // Never end on half a surrogate pair or on punctuation that would sit oddly before the ellipsis.
  return `${cut.replace(/[\uD800-\uDBFF]$/, '').replace(/[\s,;:.]+$/, '')}${ELLIPSIS}`;
}
