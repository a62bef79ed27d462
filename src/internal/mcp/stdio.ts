/**
 * The stdio transport of MCP servers, in place of the SDK's: the server leads a process group of its
 * own with a mark in its environment (so `processGroup.stop` can end it and everything it started), and
 * a line of its stdout is never buffered past `maxMessageBytes` (the rest of such a line is dropped as
 * it arrives and `onTooLarge` is told).
 */
import { deserializeMessage, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import * as ChildProcess from "node:child_process"
import type { Readable } from "node:stream"

/** The environment variable that marks a server and its descendants. */
export const markVariable = "EFFECT_AGENT_MCP_SERVER"

export interface Options {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env: { readonly [key: string]: string }
  readonly cwd?: string | undefined
  /** `VARIABLE=value`, put in the server's environment. */
  readonly mark: string
  readonly maxMessageBytes: number
  readonly onTooLarge: (bytes: number) => void
  readonly onStderr: (chunk: Buffer) => void
}

export class StdioTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: ((message: JSONRPCMessage) => void) | undefined
  private child: ChildProcess.ChildProcess | undefined
  private line: Array<Buffer> = []
  private lineBytes = 0
  private dropping = false
  private exitedResolve: () => void = () => undefined
  /** Settles once the server process has exited and been reaped (at once if it never started). */
  readonly exited = new Promise<void>((resolve) => {
    this.exitedResolve = resolve
  })

  constructor(readonly options: Options) {}

  get pid(): number | undefined {
    return this.child?.pid
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const [variable, value] = splitMark(this.options.mark)
      const child = ChildProcess.spawn(this.options.command, [...this.options.args], {
        env: { ...this.options.env, [variable]: value },
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
        windowsHide: true,
        ...(this.options.cwd === undefined ? {} : { cwd: this.options.cwd })
      })
      this.child = child
      child.on("error", (error) => {
        if (child.pid === undefined) this.exitedResolve()
        reject(error)
        this.onerror?.(error)
      })
      child.on("spawn", () => resolve())
      child.on("exit", () => this.exitedResolve())
      child.on("close", () => {
        this.child = undefined
        this.onclose?.()
      })
      child.stdin!.on("error", (error) => this.onerror?.(error))
      child.stdout!.on("data", (chunk: Buffer) => this.read(chunk))
      child.stdout!.on("error", (error) => this.onerror?.(error))
      child.stderr!.on("data", this.options.onStderr)
      ;(child.stderr as Readable).on("error", () => undefined)
    })
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin
      if (stdin === undefined || stdin === null || stdin.destroyed) return reject(new Error("Not connected"))
      if (stdin.write(serializeMessage(message))) resolve()
      else stdin.once("drain", resolve)
    })
  }

  /** Ends the server's stdin; the process group is ended by the caller, with escalation. */
  close(): Promise<void> {
    this.child?.stdin?.end()
    return Promise.resolve()
  }

  private read(chunk: Buffer): void {
    let start = 0
    while (start <= chunk.length) {
      const newline = chunk.indexOf(10, start)
      const end = newline === -1 ? chunk.length : newline
      if (!this.dropping && end > start) {
        this.lineBytes += end - start
        if (this.lineBytes > this.options.maxMessageBytes) {
          this.dropping = true
          this.line = []
          this.options.onTooLarge(this.lineBytes)
        } else {
          this.line.push(chunk.subarray(start, end))
        }
      }
      if (newline === -1) return
      const text = this.dropping ? undefined : Buffer.concat(this.line).toString("utf8").replace(/\r$/, "")
      this.line = []
      this.lineBytes = 0
      this.dropping = false
      start = newline + 1
      if (text !== undefined && text !== "") this.deliver(text)
    }
  }

  private deliver(line: string): void {
    let message: JSONRPCMessage
    try {
      message = deserializeMessage(line)
    } catch (error) {
      this.onerror?.(error as Error)
      return
    }
    this.onmessage?.(message)
  }
}

const splitMark = (mark: string): [string, string] => {
  const at = mark.indexOf("=")
  return [mark.slice(0, at), mark.slice(at + 1)]
}
