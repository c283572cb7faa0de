#!/usr/bin/env node
import { main } from './command-line.js';

main(process.argv.slice(2)).then((status) => {
  process.exitCode = status;
});
