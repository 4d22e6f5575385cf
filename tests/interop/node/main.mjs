// Runs one named case of a client script against Iris and prints its result as one JSON line.
// Usage: node <script>.mjs <case>, with IRIS_BASE_URL set to Iris's /v1 URL.
export const baseURL = process.env.IRIS_BASE_URL;
export const model = "fake-model";

export async function main(cases) {
  const name = process.argv[2];
  if (!baseURL || !(name in cases)) {
    console.error(`usage: IRIS_BASE_URL=... node script.mjs {${Object.keys(cases).join("|")}}`);
    process.exit(2);
  }
  try {
    console.log(JSON.stringify(await cases[name]()));
  } catch (error) {
    // The whole error (status, body, cause) for the test's failure message.
    console.error(error?.stack ?? error);
    if (error?.responseBody) console.error("response body:", error.responseBody);
    if (error?.cause) console.error("cause:", error.cause);
    process.exit(1);
  }
}
