// Types of the `koa3` dev dependency (an npm alias of koa@3): @types/koa describes Koa 3 already.
declare module 'koa3' {
  import Koa from 'koa';
  export default Koa;
}
