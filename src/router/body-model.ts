/**
 * Finding a request's `model` in the first bytes of its JSON body, without
 * waiting for the rest: the router forwards the body as it arrives, so it
 * reads only as far as the top-level `model` member. Pure.
 *
 * The scan checks the structure it walks through (an object, string keys,
 * balanced brackets, strings closed) but not the members it skips: the
 * engine parses the whole body and answers a malformed one itself.
 */

export type ModelScan =
  /** Not decided yet: more of the body is needed. */
  | { kind: "more" }
  | { kind: "model"; model: string }
  /** The body cannot be routed: the message says why (a 400). */
  | { kind: "invalid"; message: string };

const MORE: ModelScan = { kind: "more" };
const WS = new Set([" ", "\t", "\n", "\r"]);

class Invalid {
  constructor(readonly message: string) {}
}
class NeedMore {}
const NEED_MORE = new NeedMore();

/** Scans `text` (the body so far); `complete`: it is the whole body. */
export function scanModel(text: string, complete: boolean): ModelScan {
  try {
    const model = new Scanner(text).model();
    if (typeof model === "string") {
      if (model === "") return { kind: "invalid", message: 'the body\'s "model" is empty: name a model' };
      return { kind: "model", model };
    }
    return {
      kind: "invalid",
      message: 'the body has no "model": name the model to use (GET /v1/models lists them)',
    };
  } catch (err) {
    if (err instanceof Invalid) return { kind: "invalid", message: err.message };
    if (err === NEED_MORE) {
      return complete
        ? {
            kind: "invalid",
            message:
              text.trim() === ""
                ? "the body is empty: send a JSON object with a model"
                : "the body is not valid JSON: it ends too early",
          }
        : MORE;
    }
    throw err;
  }
}

class Scanner {
  i = 0;
  constructor(readonly s: string) {}

  /** The top-level model, or undefined when the object has none. */
  model(): string | undefined {
    this.ws();
    if (this.peek() !== "{") throw new Invalid("the body must be a JSON object");
    this.i++;
    this.ws();
    if (this.peek() === "}") return undefined;
    for (;;) {
      this.ws();
      if (this.peek() !== '"')
        throw new Invalid("the body is not valid JSON: a member name must be a string");
      const key = this.string();
      this.ws();
      if (this.peek() !== ":")
        throw new Invalid("the body is not valid JSON: ':' expected after a member name");
      this.i++;
      this.ws();
      if (key === "model") {
        if (this.peek() !== '"') throw new Invalid('the body\'s "model" must be a string');
        return this.string();
      }
      this.skipValue();
      this.ws();
      const c = this.peek();
      this.i++;
      if (c === "}") return undefined;
      if (c !== ",") throw new Invalid("the body is not valid JSON: ',' or '}' expected between members");
    }
  }

  peek(): string {
    if (this.i >= this.s.length) throw NEED_MORE;
    return this.s[this.i] as string;
  }

  ws(): void {
    while (this.i < this.s.length && WS.has(this.s[this.i] as string)) this.i++;
  }

  /** A JSON string at i, decoded; i after its closing quote. */
  string(): string {
    const start = this.i;
    this.i++;
    for (;;) {
      const c = this.peek();
      if (c === "\\") this.i += 2;
      else if (c === '"') break;
      else this.i++;
    }
    this.i++;
    try {
      return JSON.parse(this.s.slice(start, this.i)) as string;
    } catch {
      throw new Invalid("the body is not valid JSON: a string is malformed");
    }
  }

  skipValue(): void {
    const c = this.peek();
    if (c === '"') {
      this.string();
      return;
    }
    if (c === "{" || c === "[") {
      const stack: string[] = [];
      for (;;) {
        const d = this.peek();
        if (d === '"') {
          this.string();
          continue;
        }
        this.i++;
        if (d === "{") stack.push("}");
        else if (d === "[") stack.push("]");
        else if (d === "}" || d === "]") {
          if (stack.pop() !== d) throw new Invalid("the body is not valid JSON: brackets do not match");
          if (stack.length === 0) return;
        }
      }
    }
    // A number, true, false or null: up to the next delimiter.
    const start = this.i;
    while (this.i < this.s.length && !/[,}\]\s]/.test(this.s[this.i] as string)) this.i++;
    if (this.i >= this.s.length) throw NEED_MORE;
    if (this.i === start) throw new Invalid(`the body is not valid JSON: unexpected ${JSON.stringify(c)}`);
  }
}
