// The engine's callback invoker (invoker.cpp). Not a public header.
#pragma once

#include "attrcheck/engine.hpp"

namespace attrcheck::rt {

CallbackInvoker* new_invoker();  // the engine's: runs user callbacks, or replays the library's runs

}  // namespace attrcheck::rt
