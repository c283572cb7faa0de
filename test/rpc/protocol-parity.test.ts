import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { BootVariable } from '../../src/core/launch-layout.js';
import { DEFAULT_LIMITS } from '../../src/core/limits.js';
import * as protocol from '../../src/rpc/protocol.js';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';

const PYTHON_DIRECTORY = fileURLToPath(new URL('../../python/', import.meta.url));

/**
 * Imports the boot the way an interpreter does and prints its wire vocabulary (its public upper-case names, and the
 * members of `BootVariable` and `ChannelErrorCode`), then the wire literals written anywhere else in the three Python
 * files (a `$` notification name, alone or in a frame, a `CODECALL_` variable, the end marker, a -32xxx code): they must come from the
 * vocabulary, or the two sides can drift apart again.
 */
const READ_VOCABULARY = `
import ast, json, sys
directory = sys.argv[1]
sys.path.insert(0, directory)
import codecall_boot as boot

def constants(namespace):
    return {name: value for name, value in vars(namespace).items() if name.isupper() and not name.startswith("_")}

vocabulary = constants(boot)
vocabulary["BootVariable"] = constants(boot.BootVariable)
vocabulary["ChannelErrorCode"] = constants(boot.ChannelErrorCode)

def is_wire_literal(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
        return text.startswith("$") or '"$' in text or "CODECALL_" in text or "codecall-end" in text
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return type(node.operand.value) is int and 32000 <= node.operand.value <= 32768
    return False

def allowed_nodes(tree, is_boot):
    allowed = set()
    for node in ast.walk(tree):
        # Docstrings may name what they document.
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            allowed.add(id(node.value))
    if is_boot:
        bodies = [tree.body] + [statement.body for statement in tree.body
                                if isinstance(statement, ast.ClassDef)
                                and statement.name in ("BootVariable", "ChannelErrorCode")]
        for body in bodies:
            for statement in body:
                if isinstance(statement, ast.Assign):
                    allowed.add(id(statement.value))
    return allowed

strays = []
for relative in ("codecall_boot.py", "codecall_session.py", "codecall_runtime/__init__.py"):
    with open(directory + "/" + relative) as handle:
        source = handle.read()
    tree = ast.parse(source)
    allowed = allowed_nodes(tree, relative == "codecall_boot.py")
    for node in ast.walk(tree):
        if is_wire_literal(node) and id(node) not in allowed:
            strays.append("%s:%d: %s" % (relative, node.lineno, ast.get_source_segment(source, node)))

print(json.dumps({"vocabulary": vocabulary, "strays": strays}))
`;

interface PythonSide {
  readonly vocabulary: Record<string, unknown>;
  readonly strays: readonly string[];
}

/** `toolCallTimeout` → `TOOL_CALL_TIMEOUT`: how the Python side names the members of a TypeScript const object. */
function pythonMembers(members: Readonly<Record<string, string | number>>): Record<string, string | number> {
  return Object.fromEntries(
    Object.entries(members).map(([name, value]) => [
      name.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase(),
      value,
    ]),
  );
}

let python: PythonSide;

beforeAll(async () => {
  const interpreter = await resolvePythonInterpreter('python3');
  const output = execFileSync(interpreter.executable, ['-S', '-c', READ_VOCABULARY, PYTHON_DIRECTORY], {
    encoding: 'utf8',
  });
  python = JSON.parse(output) as PythonSide;
});

describe('the wire protocol is one vocabulary on both sides', () => {
  it('the Python boot defines exactly the constants of src/rpc/protocol.ts and BootVariable, with the same values', () => {
    const scalars = Object.entries(protocol).filter(
      ([, value]) => typeof value === 'string' || typeof value === 'number',
    );
    const others = Object.entries(protocol)
      .filter(([, value]) => typeof value !== 'function' && typeof value !== 'string' && typeof value !== 'number')
      .map(([name]) => name);
    // A new kind of export in protocol.ts needs a place in this comparison.
    expect(others).toEqual(['ChannelErrorCode']);
    expect(python.vocabulary).toEqual({
      ...Object.fromEntries(scalars),
      ChannelErrorCode: pythonMembers(protocol.ChannelErrorCode),
      BootVariable: pythonMembers(BootVariable),
      DEFAULT_MAX_FRAME_BYTES: DEFAULT_LIMITS.maxFrameBytes,
    });
  });

  it('the Python files write no wire literal outside that vocabulary', () => {
    expect(python.strays).toEqual([]);
  });

  it('the end marker the host looks for is the one the boot writes', () => {
    expect(protocol.outputEndMarker('5f0c2a9e').toString('latin1')).toBe(
      `${python.vocabulary.OUTPUT_END_MARKER_PREFIX}5f0c2a9e${python.vocabulary.OUTPUT_END_MARKER_SUFFIX}`,
    );
  });
});
