/**
 * How PostgreSQL values (in their text form) become JSON values for the script:
 * - smallint, integer, oid → int; bigint → int, or str beyond ±(2^53 − 1) where a float would round it;
 * - real, double precision → float ("NaN", "Infinity", "-Infinity" as str: JSON has no such numbers);
 * - numeric/decimal → str, exactly as PostgreSQL prints it (`Decimal(value)` in Python keeps every digit);
 * - boolean → bool; json, jsonb → the parsed value; bytea → `{"base64": "..."}`;
 * - date → "YYYY-MM-DD"; timestamp → "YYYY-MM-DDTHH:MM:SS[.ffffff]"; timestamptz → the same with its offset
 *   ("+00:00"), all readable by `datetime.fromisoformat`; time, timetz, interval → str as PostgreSQL prints them;
 * - arrays of these → lists; NULL → None; every other type (uuid, text, inet, money, ...) → its text.
 */
export type PostgresTextParser = (text: string) => unknown;

const TYPE_IDS = {
  bool: 16,
  bytea: 17,
  int8: 20,
  int2: 21,
  int4: 23,
  oid: 26,
  json: 114,
  float4: 700,
  float8: 701,
  timestamp: 1114,
  timestamptz: 1184,
  numeric: 1700,
  jsonb: 3802,
} as const;

/** Deepest array nesting parsed (PostgreSQL allows 6 dimensions). */
const MAX_ARRAY_DEPTH = 16;

const parseBoolean: PostgresTextParser = (text) => text === 't' || text === 'true';
const parseSmallInteger: PostgresTextParser = (text) => Number(text);
const parseBigInteger: PostgresTextParser = (text) => {
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : text;
};
const parseFloatingPoint: PostgresTextParser = (text) => {
  const value = Number(text);
  return Number.isFinite(value) ? value : text;
};
const parseJson: PostgresTextParser = (text) => JSON.parse(text);
const parseTimestamp: PostgresTextParser = (text) => text.replace(' ', 'T');
// ISO DateStyle prints "+01" for a whole-hour offset; Python before 3.11 and many parsers want "+01:00".
const parseTimestampWithZone: PostgresTextParser = (text) => text.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00');
const parseBytes: PostgresTextParser = (text) => ({ base64: decodeBytea(text).toString('base64') });

const SCALAR_PARSERS: ReadonlyMap<number, PostgresTextParser> = new Map([
  [TYPE_IDS.bool, parseBoolean],
  [TYPE_IDS.bytea, parseBytes],
  [TYPE_IDS.int8, parseBigInteger],
  [TYPE_IDS.int2, parseSmallInteger],
  [TYPE_IDS.int4, parseSmallInteger],
  [TYPE_IDS.oid, parseSmallInteger],
  [TYPE_IDS.json, parseJson],
  [TYPE_IDS.float4, parseFloatingPoint],
  [TYPE_IDS.float8, parseFloatingPoint],
  [TYPE_IDS.timestamp, parseTimestamp],
  [TYPE_IDS.timestamptz, parseTimestampWithZone],
  [TYPE_IDS.jsonb, parseJson],
]);

/** Array types by id, with the type id of their elements (text-like element types keep their text). */
const ARRAY_ELEMENT_TYPES: ReadonlyMap<number, number> = new Map([
  [1000, TYPE_IDS.bool],
  [1001, TYPE_IDS.bytea],
  [1016, TYPE_IDS.int8],
  [1005, TYPE_IDS.int2],
  [1007, TYPE_IDS.int4],
  [1028, TYPE_IDS.oid],
  [199, TYPE_IDS.json],
  [1021, TYPE_IDS.float4],
  [1022, TYPE_IDS.float8],
  [1115, TYPE_IDS.timestamp],
  [1185, TYPE_IDS.timestamptz],
  [1231, TYPE_IDS.numeric],
  [3807, TYPE_IDS.jsonb],
  // text[], varchar[], char[], name[], date[], time[], timetz[], interval[], uuid[]: elements keep their text.
  [1009, 0],
  [1015, 0],
  [1014, 0],
  [1003, 0],
  [1182, 0],
  [1183, 0],
  [1270, 0],
  [1187, 0],
  [2951, 0],
]);

const keepText: PostgresTextParser = (text) => text;

/** The parser of a type's text form (see {@link PostgresTextParser} for the conversions). */
export function postgresTextParser(typeId: number): PostgresTextParser {
  const scalar = SCALAR_PARSERS.get(typeId);
  if (scalar !== undefined) return scalar;
  const elementType = ARRAY_ELEMENT_TYPES.get(typeId);
  if (elementType === undefined) return keepText;
  const element = SCALAR_PARSERS.get(elementType) ?? keepText;
  return (text) => parseArrayLiteral(text, element);
}

/** The `types` option of a pg client: the conversions above for text results, pg's own for binary ones. */
export const POSTGRES_TYPES = {
  getTypeParser(typeId: number, format?: string): PostgresTextParser {
    return format === 'binary' ? keepText : postgresTextParser(typeId);
  },
};

/**
 * Parses PostgreSQL's array output (`{1,2,NULL,"a \"b\"",{3,4}}`, optionally prefixed by bounds `[0:1]=`) into
 * nested lists, each element through `element` (NULL → null).
 * @throws Error on text that is not an array literal.
 */
export function parseArrayLiteral(text: string, element: PostgresTextParser): unknown[] {
  const start = text.startsWith('[') ? text.indexOf('=') + 1 : 0;
  let position = start;
  const fail = (): never => {
    throw new Error(`cannot read the PostgreSQL array ${JSON.stringify(text.slice(0, 80))}`);
  };
  const parseLevel = (depth: number): unknown[] => {
    if (depth > MAX_ARRAY_DEPTH || text[position] !== '{') fail();
    position += 1;
    const items: unknown[] = [];
    if (text[position] === '}') {
      position += 1;
      return items;
    }
    for (;;) {
      if (text[position] === '{') items.push(parseLevel(depth + 1));
      else if (text[position] === '"') {
        let value = '';
        position += 1;
        while (position < text.length && text[position] !== '"') {
          if (text[position] === '\\') position += 1;
          value += text[position] ?? '';
          position += 1;
        }
        if (position >= text.length) fail();
        position += 1;
        items.push(element(value));
      } else {
        const end = nextDelimiter(text, position);
        const raw = text.slice(position, end);
        position = end;
        items.push(raw === 'NULL' ? null : element(raw));
      }
      if (text[position] === ',') position += 1;
      else if (text[position] === '}') {
        position += 1;
        return items;
      } else fail();
    }
  };
  const parsed = parseLevel(1);
  if (position !== text.length) fail();
  return parsed;
}

function nextDelimiter(text: string, from: number): number {
  for (let index = from; index < text.length; index += 1) {
    const character = text[index];
    if (character === ',' || character === '}') return index;
  }
  return text.length;
}

/** bytea in hex (`\x0102`, the default output) or escape format (`\001\\abc`). */
function decodeBytea(text: string): Buffer {
  if (text.startsWith('\\x')) return Buffer.from(text.slice(2), 'hex');
  const bytes: number[] = [];
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code !== 0x5c) {
      bytes.push(code);
    } else if (text[index + 1] === '\\') {
      bytes.push(0x5c);
      index += 1;
    } else {
      bytes.push(Number.parseInt(text.slice(index + 1, index + 4), 8));
      index += 3;
    }
  }
  return Buffer.from(bytes);
}
