// Types of the console's scripts, from the API types generated into
// clients/ts (make clients-ts): a script that starts with // @ts-check is
// type-checked against them by web/typecheck_test.go. The browser never
// loads this file.
import type { components } from "../clients/ts/src/schema";

declare global {
  /** The console's API calls (api.js, a module that runs first). */
  const mq: typeof import("./dist/api.js").mq;
  type Stats = components["schemas"]["Stats"];
  type ConsumerStat = components["schemas"]["ConsumerStat"];
  type LevelBacklogStat = components["schemas"]["LevelBacklogStat"];
  /** uPlot (vendor/uPlot.iife.min.js), as far as live.js uses it. */
  class uPlot {
    constructor(opts: object, data: number[][], target: HTMLElement);
    width: number;
    setData(data: number[][]): void;
    setSize(size: { width: number; height: number }): void;
  }
}
export {};
