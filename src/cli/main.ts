#!/usr/bin/env node
import { EXIT_SCRIPT_FAILED, main } from './command-line.js';

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(
      `codecall: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = EXIT_SCRIPT_FAILED;
  },
);
