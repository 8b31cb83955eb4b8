// stormgate on Azure: a Linux function app on Flex Consumption running the Rust custom handler, its storage and
// monitoring, an Azure OpenAI account with one deployment per tier (two different models, so two separate quota
// pools), Azure Managed Redis, Key Vault, the managed identity that ties them together, diagnostic settings that
// send Key Vault, Azure OpenAI and function logs to the workspace, and, with `privateNetworking`, a virtual
// network with private endpoints for every data service.
//
// Deploy into an existing resource group:
//   az deployment group create -g <rg> -f infra/main.bicep -p infra/main.dev.bicepparam

targetScope = 'resourceGroup'

import { tierDeployments } from 'modules/openai.bicep'

@description('Short prefix for resource names (lowercase letters, digits, hyphens).')
@minLength(3)
@maxLength(12)
param namePrefix string = 'stormgate'

@description('Azure region for every resource; it must offer Flex Consumption and Azure Managed Redis, and each tier\'s model under its deployment type (docs/deploy.md, "Region and deployment type").')
param location string = resourceGroup().location

@description('Tags applied to every resource.')
param tags object = {}

// ---- Hosting: Flex Consumption -------------------------------------------------------------------------------
// Elastic Premium is not offered: on Linux Elastic Premium, `func azure functionapp publish` uploads the package
// with the AzureWebJobsStorage connection string (this deployment writes identity-based storage settings only)
// and sets WEBSITE_RUN_FROM_PACKAGE, which the next deployment of the app settings would wipe. Flex Consumption
// deploys from a blob container with the app's managed identity, runs the Kafka trigger, and integrates with a
// virtual network (docs/deploy.md, "Why Flex Consumption only").

@description('Most instances the app scales out to.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Memory per instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Instances kept always ready for classify. Flex Consumption scales each non-HTTP function on its own, and classify scaling out from zero waits on the scale controller reading Kafka lag with the Key Vault-referenced password: one warm instance keeps the topic consumed whatever that path does.')
@minValue(1)
param classifyAlwaysReady int = 1

@description('Redundancy of the Functions host storage account.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
])
param storageSkuName string = 'Standard_LRS'

@description('Days of log retention in Log Analytics.')
@minValue(30)
@maxValue(730)
param logRetentionInDays int = 30

@description('RUST_LOG filter for the handler.')
param rustLog string = 'info'

@description('Key Vault purge protection; keep it on in production (it cannot be turned off again).')
param keyVaultPurgeProtection bool = true

// ---- Networking -----------------------------------------------------------------------------------------------

@description('Private networking: the function app integrates with a virtual network, every data service (storage, Key Vault, Azure OpenAI, Azure Managed Redis) gets a private endpoint and turns public network access off, and outbound traffic leaves through a NAT gateway with a fixed address. The deploying machine then reaches none of them from outside (docs/deploy.md, "Private networking").')
param privateNetworking bool = false

@description('Address space of the virtual network with privateNetworking (a /16 to /23; two /24 subnets are taken from it).')
param vnetAddressPrefix string = '10.40.0.0/16'

// ---- Azure OpenAI ---------------------------------------------------------------------------------------------

@description('Turn off API-key access to Azure OpenAI; the app always uses its managed identity.')
param openAiDisableLocalAuth bool = true

@description('Azure OpenAI data-plane API version the handler calls.')
param openAiApiVersion string = '2024-10-21'

// One object per tier: what the Azure OpenAI module deploys and, from the very same object, the deployment
// name, model, tokens and requests per minute and prices the function app's settings give the governor and the
// cost figures. Defaults and their sources are in docs/deploy.md, "Models, quotas and prices".
@description('Per tier: deployment name, model and version, deployment type (sku: GlobalStandard, DataZoneStandard or regional Standard, each a separate quota pool), capacity in units of 1,000 tokens per minute, requests per minute per unit (1 for the gpt-4.1 family, 6 for gpt-4o; Azure\'s quota tables), and USD per million input and output tokens.')
param modelDeployments tierDeployments = {
  premium: {
    name: 'premium'
    model: 'gpt-4.1'
    version: '2025-04-14'
    sku: 'GlobalStandard'
    capacity: 10
    rpmPerUnit: 1
    priceInputPer1M: '2.00'
    priceOutputPer1M: '8.00'
  }
  standard: {
    name: 'standard'
    model: 'gpt-4.1-mini'
    version: '2025-04-14'
    sku: 'GlobalStandard'
    capacity: 30
    rpmPerUnit: 1
    priceInputPer1M: '0.40'
    priceOutputPer1M: '1.60'
  }
}

@description('Fraction of each deployment budget the governor keeps in reserve (429s arrive slightly before the limit).')
param governorHeadroom string = '0.10'

@description('Tier of each summary kind at each routing severity, P1 to P5 (STORMGATE_TIER_TABLE; README, Configuration). The default is the seed write-up\'s: P4/P5 technician summaries extractive while the standard deployment is contested; lifted tickets use what the tickets ServiceNow rates leave over.')
param tierTable string = 'technician=premium,premium,standard,standard-when-calm,standard-when-calm;lifted=premium-when-calm,premium-when-calm,standard-when-calm,standard-when-calm,standard-when-calm;customer=standard,standard,standard,standard,standard'

// ---- Redis ----------------------------------------------------------------------------------------------------

@description('managed = deploy Azure Managed Redis; existing = use the Redis whose URL is given in existingRedisUrl.')
@allowed([
  'managed'
  'existing'
])
param redisMode string = 'managed'

@description('Azure Managed Redis SKU.')
param redisSkuName string = 'Balanced_B0'

@description('Azure Managed Redis append-only-file persistence.')
param redisPersistenceEnabled bool = true

@description('Existing Redis only: url = credentials in the URL (or none); entra = the app identity signs in (grant it an access policy on that cache).')
@allowed([
  'url'
  'entra'
])
param existingRedisAuth string = 'entra'

@description('Existing Redis only: its rediss:// URL, with credentials in it if the cache uses them. Stored in Key Vault. Pass an empty string with redisMode=managed.')
@secure()
param existingRedisUrl string

// ---- Kafka ----------------------------------------------------------------------------------------------------

@description('Kafka bootstrap servers, host:port[,host:port].')
param kafkaBrokers string

@description('Topic carrying ServiceNow incident events.')
param kafkaTopic string

@description('Consumer group of the classify trigger.')
param kafkaConsumerGroup string = 'stormgate'

@description('SASL user name for Kafka.')
param kafkaUsername string

@description('SASL password for Kafka. Stored in Key Vault.')
@secure()
@minLength(1)
param kafkaPassword string

@description('Topic for customer notifications.')
param kafkaNotificationsTopic string

// ---- ServiceNow and search (optional) ---------------------------------------------------------------------------

@description('ServiceNow instance URL, e.g. https://example.service-now.com; empty turns work-note write-back off.')
param serviceNowInstanceUrl string = ''

@description('ServiceNow integration user name.')
param serviceNowUsername string = ''

@description('ServiceNow integration user password. Stored in Key Vault. Pass an empty string when write-back is off.')
@secure()
param serviceNowPassword string

@description('Azure AI Search endpoint; empty turns search enrichment off.')
param searchEndpoint string = ''

@description('Azure AI Search index name.')
param searchIndex string = ''

@description('Azure AI Search API key. Stored in Key Vault. Pass an empty string when search is off.')
@secure()
param searchApiKey string

// ---- Alerts (infra/modules/alerts.bicep; what each means: docs/operations.md, "Alerts") --------------------------

@description('Resource id of the action group the alerts notify; empty: they fire in the portal only.')
param alertActionGroupId string = ''

@description('Consumer lag, in seconds, above which the consumer-lag alert fires.')
@minValue(10)
param alertConsumerLagSeconds int = 120

@description('429s per minute on one deployment above which the throttling alert fires.')
@minValue(1)
param alertThrottlesPerMinute int = 10

@description('Dead letters per hour above which the dead-letter alert fires.')
@minValue(1)
param alertDeadLettersPerHour int = 10

@description('Redis memory use, in percent of maxmemory, above which the Redis alert fires.')
@minValue(10)
@maxValue(99)
param alertRedisMemoryPercent int = 80

@description('Failed invocations of one function in 15 minutes above which the failures alert fires.')
@minValue(1)
param alertFunctionFailures int = 5

// ---- Derived values -------------------------------------------------------------------------------------------

var token = take(uniqueString(subscription().id, resourceGroup().id, namePrefix), 8)
var compactPrefix = toLower(take(replace(namePrefix, '-', ''), 12))
var useManagedRedis = redisMode == 'managed'
var appName = 'func-${namePrefix}-${token}'
var publicNetworkAccess = privateNetworking ? 'Disabled' : 'Enabled'

// A URL without its secret would deploy and then stop the handler at start-up: fail the deployment instead.
// (fail() ends the deployment when the condition holds; Bicep's flow-control functions, Microsoft Learn.)
var serviceNowPasswordChecked = !empty(serviceNowInstanceUrl) && (empty(serviceNowPassword) || empty(serviceNowUsername))
  ? fail('serviceNowInstanceUrl is set: serviceNowUsername and serviceNowPassword are required (export SERVICENOW_PASSWORD).')
  : serviceNowPassword
var searchApiKeyChecked = !empty(searchEndpoint) && (empty(searchApiKey) || empty(searchIndex))
  ? fail('searchEndpoint is set: searchIndex and searchApiKey are required (export SEARCH_API_KEY).')
  : searchApiKey
var existingRedisUrlChecked = !useManagedRedis && empty(existingRedisUrl)
  ? fail('redisMode is existing: existingRedisUrl is required (export EXISTING_REDIS_URL).')
  : existingRedisUrl

var allTags = union(tags, {
  application: 'stormgate'
})

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: allTags
    workspaceName: 'log-${namePrefix}-${token}'
    appInsightsName: 'appi-${namePrefix}-${token}'
    retentionInDays: logRetentionInDays
    disableLocalAuth: true
  }
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  params: {
    location: location
    tags: allTags
    appInsightsName: monitoring.outputs.appInsightsName
    actionGroupId: alertActionGroupId
    consumerLagSeconds: alertConsumerLagSeconds
    throttlesPerMinute: alertThrottlesPerMinute
    deadLettersPerHour: alertDeadLettersPerHour
    redisMemoryPercent: alertRedisMemoryPercent
    functionFailures: alertFunctionFailures
  }
}

module workbook 'modules/workbook.bicep' = {
  name: 'workbook'
  params: {
    location: location
    tags: allTags
    appInsightsName: monitoring.outputs.appInsightsName
  }
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  params: {
    location: location
    tags: allTags
    name: 'id-${namePrefix}-${token}'
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    tags: allTags
    name: 'st${compactPrefix}${token}'
    skuName: storageSkuName
    deploymentContainerName: 'app-package'
    workQueueNames: [
      'summarize-premium'
      'summarize-standard'
    ]
    publicNetworkAccess: publicNetworkAccess
  }
}

module openAi 'modules/openai.bicep' = {
  name: 'openai'
  params: {
    location: location
    tags: allTags
    name: 'oai-${namePrefix}-${token}'
    disableLocalAuth: openAiDisableLocalAuth
    deployments: modelDeployments
    publicNetworkAccess: publicNetworkAccess
  }
}

module redis 'modules/redis.bicep' = if (useManagedRedis) {
  name: 'redis'
  params: {
    location: location
    tags: allTags
    name: 'redis-${namePrefix}-${token}'
    skuName: redisSkuName
    persistenceEnabled: redisPersistenceEnabled
    appPrincipalId: identity.outputs.principalId
    publicNetworkAccess: publicNetworkAccess
  }
}

module keyVault 'modules/keyvault.bicep' = {
  name: 'keyvault'
  params: {
    location: location
    tags: allTags
    name: 'kv-${compactPrefix}-${token}'
    enablePurgeProtection: keyVaultPurgeProtection
    kafkaPassword: kafkaPassword
    serviceNowPassword: serviceNowPasswordChecked
    searchApiKey: searchApiKeyChecked
    existingRedisUrl: useManagedRedis ? '' : existingRedisUrlChecked
    publicNetworkAccess: publicNetworkAccess
  }
}

module access 'modules/access.bicep' = {
  name: 'access'
  params: {
    principalId: identity.outputs.principalId
    openAiAccountName: openAi.outputs.name
    keyVaultName: keyVault.outputs.name
    storageAccountName: storage.outputs.name
    appInsightsName: monitoring.outputs.appInsightsName
  }
}

module network 'modules/network.bicep' = if (privateNetworking) {
  name: 'network'
  params: {
    location: location
    tags: allTags
    namePrefix: '${namePrefix}-${token}'
    addressPrefix: vnetAddressPrefix
    storageAccountId: storage.outputs.id
    keyVaultId: keyVault.outputs.id
    openAiAccountId: openAi.outputs.id
    redisClusterId: useManagedRedis ? redis.outputs.id : ''
  }
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  // Key Vault references and identity-based storage resolve only once the roles exist.
  dependsOn: [
    access
  ]
  params: {
    location: location
    tags: allTags
    planName: 'plan-${namePrefix}-${token}'
    appName: appName
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    classifyAlwaysReady: classifyAlwaysReady
    appSubnetId: privateNetworking ? network.outputs.appSubnetId : ''
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    identityPrincipalId: identity.outputs.principalId
    storageAccountName: storage.outputs.name
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    appInsightsConnectionString: monitoring.outputs.appInsightsConnectionString
    openAiEndpoint: openAi.outputs.endpoint
    openAiApiVersion: openAiApiVersion
    modelDeployments: modelDeployments
    governorHeadroom: governorHeadroom
    tierTable: tierTable
    managedRedisUrl: useManagedRedis ? redis.outputs.url : ''
    existingRedisAuth: existingRedisAuth
    keyVaultUri: keyVault.outputs.uri
    vaultReferences: {
      kafkaPassword: keyVault.outputs.kafkaPasswordRef
      serviceNowPassword: keyVault.outputs.serviceNowPasswordRef
      searchApiKey: keyVault.outputs.searchApiKeyRef
      existingRedisUrl: keyVault.outputs.existingRedisUrlRef
    }
    kafkaBrokers: kafkaBrokers
    kafkaTopic: kafkaTopic
    kafkaConsumerGroup: kafkaConsumerGroup
    kafkaUsername: kafkaUsername
    kafkaNotificationsTopic: kafkaNotificationsTopic
    serviceNowInstanceUrl: serviceNowInstanceUrl
    serviceNowUsername: serviceNowUsername
    searchEndpoint: searchEndpoint
    searchIndex: searchIndex
    rustLog: rustLog
  }
}

module diagnostics 'modules/diagnostics.bicep' = {
  name: 'diagnostics'
  params: {
    workspaceId: monitoring.outputs.workspaceId
    keyVaultName: keyVault.outputs.name
    openAiAccountName: openAi.outputs.name
    functionAppName: functionApp.outputs.name
  }
}

output resourceGroupName string = resourceGroup().name
output functionAppName string = functionApp.outputs.name
output functionAppHostName string = functionApp.outputs.defaultHostName
output privateNetworking bool = privateNetworking
output egressAddress string = privateNetworking ? network.outputs.egressAddress : ''
output identityClientId string = identity.outputs.clientId
output identityPrincipalId string = identity.outputs.principalId
output storageAccountName string = storage.outputs.name
output keyVaultName string = keyVault.outputs.name
output appInsightsName string = monitoring.outputs.appInsightsName
output alertRuleNames array = alerts.outputs.alertRuleNames
output workbookId string = workbook.outputs.workbookId
output openAiAccountName string = openAi.outputs.name
output openAiEndpoint string = openAi.outputs.endpoint
output premiumDeploymentName string = modelDeployments.premium.name
output premiumTokensPerMinute int = modelDeployments.premium.capacity * 1000
output premiumRequestsPerMinute int = modelDeployments.premium.capacity * modelDeployments.premium.rpmPerUnit
output standardDeploymentName string = modelDeployments.standard.name
output standardTokensPerMinute int = modelDeployments.standard.capacity * 1000
output standardRequestsPerMinute int = modelDeployments.standard.capacity * modelDeployments.standard.rpmPerUnit
output redisHostName string = useManagedRedis ? redis.outputs.hostName : ''
