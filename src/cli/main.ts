#!/usr/bin/env node
import { EXIT_SCRIPT_FAILED, main } from './command-line.js';
import { terminalText } from './terminal-output.js';

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(
      `codecall: internal error: ${terminalText(error instanceof Error ? (error.stack ?? error.message) : String(error))}\n`,
    );
    process.exitCode = EXIT_SCRIPT_FAILED;
  },
);
