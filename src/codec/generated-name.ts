/**
 * How a generated encoder or decoder function is named: a JavaScript
 * identifier for the function and a file name for its `//# sourceURL`, so
 * stack traces and CPU profiles say which message type's code ran
 * (`read_llmgw_v1_Event` at `llmgw-codec/decode/llmgw.v1.Event.js`)
 * instead of an anonymous function in an eval.
 *
 * A protobuf type name is letters, digits, `_` and `.`; anything else is
 * written as `_` here, so no name from a schema can end the comment or the
 * identifier it is put in.
 */
export function generatedName(typeName: string): { identifier: string; file: string } {
  const file = typeName.replace(/[^A-Za-z0-9_.]/g, "_");
  return { identifier: file.replace(/\./g, "_"), file };
}
