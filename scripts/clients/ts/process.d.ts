// The part of Node's globals that cycle.ts uses, instead of all of @types/node (whose 50,000
// lines would triple the type-check's time).
declare const process: { env: Record<string, string | undefined>; exit(code: number): never };
