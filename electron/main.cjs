// Electron entry (package.json "main"). Electron runs JavaScript, the shell is TypeScript run
// through tsx like the rest of Arbor; register tsx's ESM loader, then load main.ts.
'use strict';
const { pathToFileURL } = require('node:url');
const { join } = require('node:path');

import('tsx/esm/api')
  .then(({ register }) => {
    register();
    return import(pathToFileURL(join(__dirname, 'main.ts')).href);
  })
  .catch((err) => {
    console.error('Arbor failed to start:', err);
    process.exit(1);
  });
