// ESLint (flat config) for the web app's own modules and these tests; the vendored libraries
// (src/iris/web/vendor/) are other projects' code and are not linted. Run from the repository
// root: `tests/webjs/node_modules/.bin/eslint -c tests/webjs/eslint.config.js` (test_js_units.py).
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["src/iris/web/vendor/**", "tests/webjs/node_modules/**"] },
  js.configs.recommended,
  {
    files: ["src/iris/web/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.browser } },
  },
  {
    files: ["src/iris/web/sw.js"],
    languageOptions: { sourceType: "script", globals: { ...globals.serviceworker } },
  },
  {
    files: ["tests/webjs/**/*.js", "tests/webjs/**/*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.node } },
  },
  {
    rules: {
      eqeqeq: ["error", "always"],
      "no-var": "error",
      "prefer-const": "error",
      "no-shadow": "error",
      "no-unused-vars": ["error", { args: "after-used", caughtErrors: "none" }],
      "no-implicit-globals": "error",
      "no-restricted-globals": ["error", { name: "__iris", message: "no test hooks on window" }],
      "no-restricted-properties": ["error",
        { object: "window", property: "__iris", message: "no test hooks on window: main.js exports `app`" }],
    },
  },
];
