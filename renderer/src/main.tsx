import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { connectEngine } from './api/connection';
import { createArborStore } from './store';
import { StoreContext } from './store/react';
import './styles.css';

const api = connectEngine();
const store = createArborStore(api);
(window as unknown as { __arborStore?: unknown }).__arborStore = store;

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <StoreContext.Provider value={store}>
      <App />
    </StoreContext.Provider>
  </StrictMode>,
);
