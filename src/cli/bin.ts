#!/usr/bin/env node
/**
 * The `effect-agent` command's entry (the package's `bin`): the help when the arguments ask for it
 * (`helpMain.ts`, which loads little), else the command (`main.ts`), with Node's warning that
 * `node:sqlite` is experimental left out (`Warnings`).
 *
 * @since 0.1.0
 */
import "./Warnings.js"
import * as HelpFlag from "./HelpFlag.js"

await (HelpFlag.asked(process.argv.slice(2)) ? import("./helpMain.js") : import("./main.js"))
